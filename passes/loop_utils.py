"""Loop mechanics shared by the schedule passes (the spirit of MLIR's LoopUtils).

A *nest* is an outermost `affine.for`; `convert-loom-to-affine` tags it with
`loom.tag = "<op>"` and every schedule pass keeps the tag on the nest's outermost loop.
A *band* is a run of perfectly nested loops: each loop's body is exactly the next loop
(and the terminator).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects import affine, arith
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AffineSetAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)
from xdsl.ir.affine.affine_set import AffineConstraintExpr, AffineSet
from xdsl.traits import IsTerminator

from compiler.diagnostics import LoomError

TAG = "loom.tag"


def nest_tag(loop: affine.ForOp) -> str | None:
    tag = loop.attributes.get(TAG)
    return tag.data if isinstance(tag, StringAttr) else None


def move_tag(old_root: affine.ForOp, new_root: affine.ForOp) -> None:
    """Keep the nest's tag on its (new) outermost loop."""
    if old_root is new_root:
        return
    tag = old_root.attributes.pop(TAG, None)
    if tag is not None:
        new_root.attributes[TAG] = tag


def select_nests(module: ModuleOp, op: str | None) -> list[affine.ForOp]:
    """Outermost affine.for loops: those tagged `op` when given, else all of them."""
    nests = []
    for candidate in module.walk():
        if not isinstance(candidate, affine.ForOp):
            continue
        if _enclosing_for(candidate) is not None:
            continue
        if op is None or nest_tag(candidate) == op:
            nests.append(candidate)
    return nests


def _enclosing_for(op: Operation) -> affine.ForOp | None:
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, affine.ForOp):
            return parent
        parent = parent.parent_op()
    return None


def perfect_band(root: affine.ForOp) -> list[affine.ForOp]:
    """The loops perfectly nested from `root` down (root included)."""
    band = [root]
    while True:
        body = [o for o in band[-1].body.block.ops if not isinstance(o, affine.YieldOp)]
        if len(body) == 1 and isinstance(body[0], affine.ForOp) and not body[0].results:
            band.append(body[0])
        else:
            return band


def loops_of_nest(root: affine.ForOp) -> list[affine.ForOp]:
    """Every affine.for in the nest, outermost first (pre-order)."""
    return [o for o in root.walk() if isinstance(o, affine.ForOp)]


def constant_bounds(loop: affine.ForOp) -> tuple[int, int] | None:
    """(lower, upper) when both bounds are single constants."""
    lb, ub = loop.lowerBoundMap.data, loop.upperBoundMap.data
    if len(lb.results) == 1 and len(ub.results) == 1:
        lo, hi = lb.results[0], ub.results[0]
        if isinstance(lo, AffineConstantExpr) and isinstance(hi, AffineConstantExpr):
            return lo.value, hi.value
    return None


def step_of(loop: affine.ForOp) -> int:
    return loop.step.value.data


def trip_count(loop: affine.ForOp) -> int | None:
    """The constant trip count, when the bounds are constant."""
    bounds = constant_bounds(loop)
    if bounds is None:
        return None
    lo, hi = bounds
    step = step_of(loop)
    return max(0, -(-(hi - lo) // step))


def iv_name(loop: affine.ForOp) -> str:
    iv = loop.body.block.args[0]
    return iv.name_hint or "?"


def describe_band(band: Sequence[affine.ForOp]) -> str:
    return "(" + ", ".join(iv_name(l) for l in band) + ")"


def check_positive(pass_name: str, option: str, values: Sequence[int] | None, *, allow_empty: bool = False) -> tuple[int, ...]:
    """Option validation: a list of positive integers. Raises LoomError naming the pass."""
    vals = tuple(values or ())
    if not vals and not allow_empty:
        raise LoomError(f"{pass_name}: option '{option}' is required (a list of positive integers)")
    bad = [v for v in vals if not isinstance(v, int) or v < 1]
    if bad:
        raise LoomError(f"{pass_name}: option '{option}' must be positive integers, got {list(vals)}")
    return vals


def check_permutation(pass_name: str, option: str, order: Sequence[int], n: int | None = None) -> tuple[int, ...]:
    vals = tuple(order or ())
    if sorted(vals) != list(range(len(vals))) or (n is not None and len(vals) != n):
        want = f" of 0..{n - 1}" if n is not None else ""
        raise LoomError(f"{pass_name}: option '{option}' must be a permutation{want}, got {list(vals)}")
    return vals


# --------------------------------------------------------------------------------------
# Bounds, extents and value ranges
# --------------------------------------------------------------------------------------


def band_at(root: affine.ForOp, depth: int) -> list[affine.ForOp]:
    """The perfect band that starts `depth` loops below `root` (root's own band at 0): after
    a 3-deep band is tiled once, depth 3 is the intra-tile band. Empty when the outermost
    band is not that deep."""
    return perfect_band(root)[depth:]


def simplify(expr: AffineExpr, num_dims: int, num_symbols: int = 0) -> AffineExpr:
    """The canonical (flattened) form of a pure affine expression; others as they are."""
    try:
        return expr.simplify(num_dims, num_symbols)
    except NotImplementedError:
        return expr


def unify_operands(
    *accesses: tuple[AffineMap, Sequence[SSAValue]], through_apply: bool = False
) -> tuple[list[SSAValue], list[tuple[AffineExpr, ...]]]:
    """The results of several (map, operands) pairs as simplified expressions over one
    shared list of values (each distinct SSA value one dim, whether it was a dim or a
    symbol of its map), so that they can be compared or subtracted. With `through_apply`
    a value computed by an `affine.apply` stands for its expression (recursively)."""
    values: list[SSAValue] = []
    index: dict[SSAValue, int] = {}

    def expr_of(value: SSAValue) -> AffineExpr:
        owner = value.owner
        if through_apply and isinstance(owner, affine.ApplyOp) and len(owner.map.data.results) == 1:
            return substitute(owner.map.data, owner.mapOperands)[0]
        if value not in index:
            index[value] = len(values)
            values.append(value)
        return AffineExpr.dimension(index[value])

    def substitute(m: AffineMap, operands: Sequence[SSAValue]) -> tuple[AffineExpr, ...]:
        exprs = [expr_of(v) for v in operands]
        return tuple(r.replace_dims_and_symbols(exprs[: m.num_dims], exprs[m.num_dims :]) for r in m.results)

    results = [substitute(m, operands) for m, operands in accesses]
    return values, [tuple(simplify(e, len(values)) for e in r) for r in results]


def constant_extent(loop: affine.ForOp) -> int | None:
    """upper - lower when both bounds are single expressions whose difference is a
    constant: `0 to 100` (100), but also `%i_t to %i_t + 32` (32), the point loop of a tile."""
    lb, ub = loop.lowerBoundMap.data, loop.upperBoundMap.data
    if len(lb.results) != 1 or len(ub.results) != 1:
        return None
    values, ((lo,), (hi,)) = unify_operands((lb, loop.lowerBoundOperands), (ub, loop.upperBoundOperands))
    diff = simplify(hi - lo, len(values))
    return diff.value if isinstance(diff, AffineConstantExpr) else None


def constant_trip_count(loop: affine.ForOp) -> int | None:
    """The trip count when the extent is constant (see `constant_extent`)."""
    extent = constant_extent(loop)
    return None if extent is None else max(0, -(-extent // step_of(loop)))


Range = tuple[int | None, int | None]


def value_range(value: SSAValue) -> Range:
    """[lo, hi] (None: unbounded) of an index value: an index constant, an affine.apply
    or affine.min, or a loop iv (at least its lower bound, less than its upper bound, at most its last
    iteration when the extent is constant; the bounds' own operands seen through their
    ranges, recursively). Holds wherever the value is defined."""
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        v = owner.value.value.data
        return v, v
    if isinstance(owner, affine.ApplyOp):
        return expr_range(owner.map.data.results[0], owner.map.data, owner.mapOperands)
    if isinstance(owner, affine.MinOp):
        ranges = [expr_range(e, owner.map.data, owner.arguments) for e in owner.map.data.results]
        los = [r[0] for r in ranges]
        lo = None if None in los else min(los)  # type: ignore[type-var]
        return lo, min((r[1] for r in ranges if r[1] is not None), default=None)
    if isinstance(owner, Block) and isinstance(loop := owner.parent_op(), affine.ForOp) and value is owner.args[0]:
        lb, ub = loop.lowerBoundMap.data, loop.upperBoundMap.data
        los = [expr_range(e, lb, loop.lowerBoundOperands)[0] for e in lb.results]
        his = [expr_range(e, ub, loop.upperBoundOperands)[1] for e in ub.results]
        lo = max((x for x in los if x is not None), default=None)
        hi = min((x - 1 for x in his if x is not None), default=None)
        trips = constant_trip_count(loop)
        if trips is not None and len(lb.results) == 1:  # the last iteration, when it is known
            last = _add(expr_range(lb.results[0], lb, loop.lowerBoundOperands)[1], (trips - 1) * step_of(loop))
            hi = last if hi is None or (last is not None and last < hi) else hi
        return lo, hi
    return None, None


def expr_range(expr: AffineExpr, m: AffineMap, operands: Sequence[SSAValue]) -> Range:
    """[lo, hi] of a result of map `m` applied to `operands` (interval arithmetic)."""
    match expr:
        case AffineConstantExpr(value=v):
            return v, v
        case AffineDimExpr(position=p):
            return value_range(operands[p])
        case AffineSymExpr(position=p):
            return value_range(operands[m.num_dims + p])
        case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
            a, b = expr_range(lhs, m, operands), expr_range(rhs, m, operands)
            if kind == AffineBinaryOpKind.Add:
                return _add(a[0], b[0]), _add(a[1], b[1])
            if kind == AffineBinaryOpKind.Mul:
                if b[0] is not None and b[0] == b[1]:
                    return _scale(a, b[0])
                if a[0] is not None and a[0] == a[1]:
                    return _scale(b, a[0])
                return None, None
            if b[0] is None or b[0] != b[1] or b[0] <= 0:
                return None, None
            c = b[0]
            if kind == AffineBinaryOpKind.Mod:
                return 0, c - 1
            div = (lambda x: x // c) if kind == AffineBinaryOpKind.FloorDiv else (lambda x: -(-x // c))
            return (None if a[0] is None else div(a[0])), (None if a[1] is None else div(a[1]))
    return None, None


def _add(x: int | None, y: int | None) -> int | None:
    return None if x is None or y is None else x + y


def _scale(r: Range, c: int) -> Range:
    lo, hi = (None if r[0] is None else r[0] * c), (None if r[1] is None else r[1] * c)
    return (lo, hi) if c >= 0 else (hi, lo)


def provably_nonempty(loop: affine.ForOp) -> bool:
    """Whether the loop runs at least once whenever it is reached: a constant extent of
    at least 1, or a point loop of a tile, `%i = %i_t to min(%i_t + 32, ub...)`, whose
    upper bounds each exceed the tile iv by a positive constant or are upper bounds of
    the tile loop itself (which %i_t is below)."""
    extent = constant_extent(loop)
    if extent is not None:
        return extent >= 1
    lb, ub = loop.lowerBoundMap.data, loop.upperBoundMap.data
    if (
        len(lb.results) != 1
        or not isinstance(lb.results[0], AffineDimExpr | AffineSymExpr)
        or len(loop.lowerBoundOperands) != 1
        or not isinstance(start := loop.lowerBoundOperands[0].owner, Block)
    ):
        return False
    outer = start.parent_op()
    if not isinstance(outer, affine.ForOp) or loop.lowerBoundOperands[0] is not start.args[0]:
        return False
    outer_ub = outer.upperBoundMap.data
    values, [(tile,), mine, theirs] = unify_operands(
        (lb, loop.lowerBoundOperands), (ub, loop.upperBoundOperands), (outer_ub, outer.upperBoundOperands)
    )
    for bound in mine:
        gap = simplify(bound - tile, len(values))
        if bound not in theirs and not (isinstance(gap, AffineConstantExpr) and gap.value >= 1):
            return False
    return True


def access_in_bounds(op: affine.LoadOp | affine.StoreOp) -> bool:
    """Whether every index of the access provably lies inside the memref's static shape,
    for all values its operands can take: then the access may be moved to where it runs
    when the original would not have (out of a loop that may not run, from under a guard)."""
    mtype = op.memref.type
    if not isinstance(mtype, MemRefType):
        return False
    m = op.map.data
    for expr, size in zip(m.results, mtype.get_shape(), strict=True):
        lo, hi = expr_range(expr, m, op.indices)
        if size < 0 or lo is None or hi is None or lo < 0 or hi >= size:
            return False
    return True


# --------------------------------------------------------------------------------------
# Names for remarks
# --------------------------------------------------------------------------------------


def value_name(value: SSAValue) -> str:
    return "%" + (value.name_hint or "?")


def format_expr(expr: AffineExpr, names: Sequence[str], num_dims: int) -> str:
    """An affine expression with `names[i]` for its operands (dims first, then symbols)."""
    match expr:
        case AffineConstantExpr(value=v):
            return str(v)
        case AffineDimExpr(position=p):
            return names[p]
        case AffineSymExpr(position=p):
            return names[num_dims + p]
        case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
            left, right = format_expr(lhs, names, num_dims), format_expr(rhs, names, num_dims)
            if kind == AffineBinaryOpKind.Add:
                if isinstance(rhs, AffineConstantExpr) and rhs.value < 0:
                    return f"{left} - {-rhs.value}"
                return f"{left} + {right}"
            if isinstance(lhs, AffineBinaryOpExpr) and lhs.kind == AffineBinaryOpKind.Add:
                left = f"({left})"
            if isinstance(rhs, AffineBinaryOpExpr):
                right = f"({right})"
            return f"{left} {kind.get_token()} {right}"
    return str(expr)


def describe_access(op: affine.LoadOp | affine.StoreOp) -> str:
    """`%c[%i, %j + 1]`: the memref and the indices of an affine load or store."""
    m = op.map.data
    names = [value_name(v) for v in op.indices]
    return f"{value_name(op.memref)}[{', '.join(format_expr(e, names, m.num_dims) for e in m.results)}]"


# --------------------------------------------------------------------------------------
# Building loops
# --------------------------------------------------------------------------------------

Bound = tuple[AffineMap, Sequence[SSAValue]]


def rebuild_loop(
    loop: affine.ForOp,
    *,
    lower: Bound | None = None,
    upper: Bound | None = None,
    step: int | None = None,
    inits: Sequence[SSAValue] | None = None,
) -> affine.ForOp:
    """A new affine.for in `loop`'s place, with `loop`'s body (moved, ivs kept),
    attributes and location, and the given bounds, step and iter_args inits (default:
    the loop's own). Inits beyond the loop's own get new block arguments at the end,
    whose yields the caller adds. `loop` is erased; its results' uses go to the first
    results of the new loop."""
    lb_map, lb_ops = lower or (loop.lowerBoundMap.data, list(loop.lowerBoundOperands))
    ub_map, ub_ops = upper or (loop.upperBoundMap.data, list(loop.upperBoundOperands))
    inits = list(loop.inits) if inits is None else list(inits)
    assert len(inits) >= len(loop.inits)
    region = loop.detach_region(loop.body)
    for value in inits[len(loop.inits) :]:
        region.block.insert_arg(value.type, len(region.block.args))
    new = affine.ForOp.from_region(
        lb_ops, ub_ops, inits, [v.type for v in inits], AffineMapAttr(lb_map), AffineMapAttr(ub_map),
        region, step if step is not None else step_of(loop),
    )
    new.attributes.update(loop.attributes)
    new.location = loop.location
    parent = loop.parent_block()
    assert parent is not None
    parent.insert_op_before(new, loop)
    for old, res in zip(loop.results, new.results):
        old.replace_all_uses_with(res)
    parent.erase_op(loop)
    return new


def _fresh_name(base: str, taken: set[str]) -> str:
    if base not in taken:
        return base
    n = 2
    while f"{base}{n}" in taken:
        n += 1
    return f"{base}{n}"


def enclosing_loops(op: Operation) -> list[affine.ForOp]:
    """The affine.for loops around `op`, outermost first."""
    loops = []
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, affine.ForOp):
            loops.append(parent)
        parent = parent.parent_op()
    return loops[::-1]


def _with_leading(first: AffineExpr, value: SSAValue, m: AffineMap, operands: Sequence[SSAValue]) -> Bound:
    """A bound whose results are `first` (over d0 = `value`) and those of `m` (over
    `operands`): for min(%i_t + 32, ub...) and max(%split, lb...)."""
    shifted = m.replace_dims_and_symbols(
        [AffineExpr.dimension(i + 1) for i in range(m.num_dims)],
        [AffineExpr.symbol(i) for i in range(m.num_symbols)],
        m.num_dims + 1, m.num_symbols,
    )
    return AffineMap(m.num_dims + 1, m.num_symbols, (first, *shifted.results)), [value, *operands]


def tile_band(band: Sequence[affine.ForOp], sizes: Sequence[int]) -> list[affine.ForOp]:
    """Tile the first len(sizes) loops of a perfect, rectangular band by `sizes`
    (iterations per tile). In band order, tile loops `for %i_t = lb to ub step size*step`
    come outermost, then point loops `for %i = %i_t to min(%i_t + size*step, ub)` (just
    `%i_t + size*step` when the size divides a constant extent; a multi-result `ub` joins
    the min), then the rest of the band unchanged. Point loops keep the ivs and
    attributes of the loops they replace; the nest's tag moves to the new outermost loop.
    Returns the tile loops then the point loops."""
    n = len(sizes)
    tiled = list(band[:n])
    taken = {iv_name(l) for l in [*enclosing_loops(tiled[0]), *band]}
    blocks = []
    for loop in tiled:
        block = Block(arg_types=[IndexType()])
        if (hint := loop.body.block.args[0].name_hint) is not None:
            block.args[0].name_hint = name = _fresh_name(f"{hint}_t", taken)
            taken.add(name)
        blocks.append(block)
    outer_bounds = [
        (loop.lowerBoundMap.data, list(loop.lowerBoundOperands), loop.upperBoundMap.data,
         list(loop.upperBoundOperands), step_of(loop) * size, loop.location)
        for loop, size in zip(tiled, sizes)
    ]
    d0 = AffineExpr.dimension(0)
    points: list[affine.ForOp] = []
    for loop, size, block in reversed(list(zip(tiled, sizes, blocks))):
        tile_iv = block.args[0]
        width = step_of(loop) * size
        trips = constant_trip_count(loop)
        if trips is not None and trips % size == 0:
            upper: Bound = (AffineMap(1, 0, (d0 + width,)), [tile_iv])
        else:
            upper = _with_leading(d0 + width, tile_iv, loop.upperBoundMap.data, loop.upperBoundOperands)
        points.append(rebuild_loop(loop, lower=(AffineMap.identity(1), [tile_iv]), upper=upper))
    points.reverse()
    first = points[0]
    parent, after = first.parent_block(), first.next_op
    assert parent is not None
    first.detach()
    inner: affine.ForOp = first
    tiles: list[affine.ForOp] = []
    for block, (lb_map, lb_ops, ub_map, ub_ops, step, location) in reversed(list(zip(blocks, outer_bounds))):
        block.add_ops([inner, affine.YieldOp.get()])
        inner = affine.ForOp.from_region(
            lb_ops, ub_ops, [], [], AffineMapAttr(lb_map), AffineMapAttr(ub_map), Region(block), step
        )
        inner.location = location
        tiles.insert(0, inner)
    if after is None:
        parent.add_op(inner)
    else:
        parent.insert_op_before(inner, after)
    move_tag(first, tiles[0])
    return [*tiles, *points]


# --------------------------------------------------------------------------------------
# Cloning bodies, unrolling
# --------------------------------------------------------------------------------------


def _map_operand_groups(op: Operation) -> list[tuple[str, int, int]]:
    """(property, first operand, operand count) of each affine map or set of an affine op."""
    match op:
        case affine.LoadOp() | affine.VectorLoadOp():
            return [("map", 1, len(op.indices))]
        case affine.StoreOp() | affine.VectorStoreOp():
            return [("map", 2, len(op.indices))]
        case affine.ApplyOp() | affine.MinOp():
            return [("map", 0, len(op.operands))]
        case affine.ForOp():
            nlb = len(op.lowerBoundOperands)
            return [("lowerBoundMap", 0, nlb), ("upperBoundMap", nlb, len(op.upperBoundOperands))]
        case affine.IfOp():
            return [("condition", 0, len(op.args))]
    return []


def _shift_operand_in_map(op: Operation, index: int, offset: int) -> bool:
    """Rewrite the affine map (or set) that reads operand `index` of `op` so that it reads
    that operand plus `offset`. False when no map of the op reads that operand."""
    for prop, start, count in _map_operand_groups(op):
        if not start <= index < start + count:
            continue
        attr = op.properties[prop]
        m = attr.data
        pos = index - start
        dims = [AffineExpr.dimension(i) for i in range(m.num_dims)]
        syms = [AffineExpr.symbol(i) for i in range(m.num_symbols)]
        if pos < m.num_dims:
            dims[pos] = dims[pos] + offset
        else:
            syms[pos - m.num_dims] = syms[pos - m.num_dims] + offset
        shift = _substitution(dims, syms, m.num_dims, m.num_symbols)
        if isinstance(attr, AffineSetAttr):
            constraints = tuple(AffineConstraintExpr(c.kind, shift(c.lhs), shift(c.rhs)) for c in m.constraints)
            op.properties[prop] = AffineSetAttr(AffineSet(m.num_dims, m.num_symbols, constraints))
        else:
            op.properties[prop] = AffineMapAttr(AffineMap(m.num_dims, m.num_symbols, tuple(shift(e) for e in m.results)))
        return True
    return False


def _substitution(
    dims: Sequence[AffineExpr], syms: Sequence[AffineExpr], num_dims: int, num_symbols: int
) -> Callable[[AffineExpr], AffineExpr]:
    def substitute(e: AffineExpr) -> AffineExpr:
        return simplify(e.replace_dims_and_symbols(dims, syms), num_dims, num_symbols)

    return substitute


def clone_body_with_iv(
    body: Block, iv: SSAValue, offset: int, value_map: dict[SSAValue, SSAValue] | None = None
) -> tuple[list[Operation], list[SSAValue]]:
    """Clones of the ops of `body` (its terminator left out; nested regions included) in
    which `iv` reads as `iv + offset`, and the values its terminator yields, mapped.
    The offset is folded into the maps of the affine ops that take `iv` (loads, stores,
    apply, min, for bounds, if conditions); any other use (a yield of `iv` included)
    reads one `affine.apply`, first in the returned list. `value_map` maps other values
    (iter_args to the previous copy's yields, say) and receives the clones' results.
    Nothing is inserted. Unrolling uses it with the loop's own iv, unroll-and-jam with an
    outer loop's iv on the innermost body."""
    mapping = dict(value_map or {})
    last = body.last_op
    term = last if last is not None and last.has_trait(IsTerminator) else None
    clones = [op.clone(value_mapper=mapping) for op in body.ops if op is not term]
    shifted: list[affine.ApplyOp] = []

    def shifted_iv() -> SSAValue:
        if not shifted:
            m = AffineMap(1, 0, (AffineExpr.dimension(0) + offset,))
            shifted.append(affine.ApplyOp([iv], AffineMapAttr(m)))
        return shifted[0].result

    for clone in clones:
        for op in clone.walk():
            for index, operand in enumerate(op.operands):
                if operand is iv and not _shift_operand_in_map(op, index, offset):
                    op.operands[index] = shifted_iv()
    yielded = [shifted_iv() if v is iv else mapping.get(v, v) for v in (term.operands if term else ())]
    return [*shifted, *clones], yielded


def _yield_of(block: Block) -> affine.YieldOp:
    """The block's affine.yield, added (empty) when the block was built without one."""
    last = block.last_op
    if isinstance(last, affine.YieldOp):
        return last
    term = affine.YieldOp.get()
    block.add_op(term)
    return term


def _set_yield(block: Block, values: Sequence[SSAValue]) -> None:
    old = _yield_of(block)
    block.insert_op_before(affine.YieldOp.get(*values), old)
    block.erase_op(old)


def unroll_loop(loop: affine.ForOp, factor: int) -> tuple[affine.ForOp, affine.ForOp | None]:
    """Unroll `loop` by `factor` (>= 2): a main loop stepping factor*step whose body is
    `factor` copies of the original (copy k reads the iv as iv + k*step, iter_args chained
    from copy to copy), then, unless the factor divides the trip count, a remainder loop
    with the original body over the iterations left, carrying on the main loop's results.
    With a constant extent the split point is a bound map; otherwise an affine.apply
    (and an affine.min for a multi-result upper bound) before the loop computes
    `lb + ((ub - lb) ceildiv step floordiv factor) * factor * step`, and the remainder
    starts at max(split, lb). A non-constant extent needs a single-result
    lower bound. Returns (main, remainder or None)."""
    step = step_of(loop)
    width = step * factor
    lb_map, lb_ops = loop.lowerBoundMap.data, list(loop.lowerBoundOperands)
    ub_map, ub_ops = loop.upperBoundMap.data, list(loop.upperBoundOperands)
    trips = constant_trip_count(loop)
    parent = loop.parent_block()
    assert parent is not None and len(lb_map.results) == 1
    main_upper: Bound = (ub_map, ub_ops)
    remainder: affine.ForOp | None = None
    rem_lower: Bound = (lb_map, lb_ops)
    if trips is not None:
        if trips % factor:
            split = lb_map.results[0] + (trips // factor) * width
            main_upper = rem_lower = (AffineMap(lb_map.num_dims, lb_map.num_symbols, (split,)), lb_ops)
            remainder = loop.clone()
    else:
        upper: Bound = (ub_map, ub_ops)
        if len(ub_map.results) > 1:
            least = affine.MinOp(ub_ops, AffineMapAttr(ub_map))
            parent.insert_op_before(least, loop)
            upper = (AffineMap.identity(1), [least.result])
        values, ((lo,), (hi,)) = unify_operands((lb_map, lb_ops), upper)
        count = hi - lo if step == 1 else (hi - lo).ceil_div(step)
        split_map = AffineMap(len(values), 0, (simplify(lo + (count // factor) * width, len(values)),))
        split = affine.ApplyOp(values, AffineMapAttr(split_map))
        parent.insert_op_before(split, loop)
        main_upper = (AffineMap.identity(1), [split.result])
        rem_lower = _with_leading(AffineExpr.dimension(0), split.result, lb_map, lb_ops)
        remainder = loop.clone()
    main = rebuild_loop(loop, upper=main_upper, step=width)
    block = main.body.block
    iv, *iter_args = block.args
    yielded = list(_yield_of(block).operands)
    copies: list[Operation] = []
    for k in range(1, factor):
        ops, yielded = clone_body_with_iv(block, iv, k * step, dict(zip(iter_args, yielded)))
        copies.extend(ops)
    block.insert_ops_before(copies, _yield_of(block))
    _set_yield(block, yielded)
    if remainder is not None:
        parent.insert_op_after(remainder, main)
        for old, new in zip(main.results, remainder.results):
            old.replace_all_uses_with(new)
        remainder = rebuild_loop(remainder, lower=rem_lower, inits=list(main.results))
    return main, remainder


# --------------------------------------------------------------------------------------
# Invariance, hoisting, scalar replacement
# --------------------------------------------------------------------------------------


def defined_outside(value: SSAValue, loop: Operation) -> bool:
    """Whether `value` is defined outside `loop` (hence invariant in it)."""
    return not loop.is_ancestor(value.owner)


def drop_unused_operands(op: affine.LoadOp | affine.StoreOp | affine.ApplyOp | affine.MinOp) -> None:
    """Rewrite the op's map to take only the operands its results use (the nests of
    convert-loom-to-affine pass every iv to every access), so that the operands say
    what the op depends on."""
    ((prop, start, count),) = _map_operand_groups(op)
    m = op.properties[prop].data
    used = set()
    for e in m.results:
        for sub in e.dfs():
            if isinstance(sub, AffineDimExpr):
                used.add(sub.position)
            elif isinstance(sub, AffineSymExpr):
                used.add(m.num_dims + sub.position)
    if len(used) == count:
        return
    keep = sorted(used)
    dims = [p for p in keep if p < m.num_dims]
    syms = [p - m.num_dims for p in keep if p >= m.num_dims]
    new_dims = [AffineExpr.dimension(dims.index(p)) if p in dims else AffineExpr.constant(0) for p in range(m.num_dims)]
    new_syms = [AffineExpr.symbol(syms.index(p)) if p in syms else AffineExpr.constant(0) for p in range(m.num_symbols)]
    operands = list(op.operands)
    op.properties[prop] = AffineMapAttr(m.replace_dims_and_symbols(new_dims, new_syms, len(dims), len(syms)))
    op.operands = [*operands[:start], *(operands[start + p] for p in keep)]


def hoist_before(op: Operation, loop: Operation) -> None:
    """Move `op` to just before `loop` (its operands must be defined outside the loop)."""
    op.detach()
    parent = loop.parent_block()
    assert parent is not None
    parent.insert_op_before(op, loop)


def memref_root(value: SSAValue) -> SSAValue:
    """The buffer a memref value views: through any op that makes a memref out of another
    (subview, cast, reinterpret_cast, ...), up to an argument or allocation. Distinct
    roots are distinct buffers (function arguments are noalias)."""
    while isinstance(owner := value.owner, Operation) and not owner.regions:
        sources = [v for v in owner.operands if isinstance(v.type, MemRefType)]
        if not sources:
            break
        value = sources[0]
    return value


def promote_to_iter_args(
    loop: affine.ForOp, groups: Sequence[Sequence[affine.LoadOp | affine.StoreOp]]
) -> affine.ForOp:
    """Scalar replacement. Each group holds the loads and stores of one memref element
    whose address is invariant in `loop`, all at the top level of the loop's body or
    under affine.if ops there (no other access to those elements in the loop). The
    element is loaded once before the loop, carried through it as an iter_arg (loads
    read the carried value, stores replace it; an affine.if that stores gets a result),
    and stored once after the loop when the group has a store. Returns the new loop."""
    inits = []
    for group in groups:
        first = group[0]
        load = affine.LoadOp(first.memref, list(first.indices), first.map, first.memref.type.get_element_type())
        load.location = first.location
        hoist_target = loop.parent_block()
        assert hoist_target is not None
        hoist_target.insert_op_before(load, loop)
        inits.append(load.result)
    kept = len(loop.inits)
    new = rebuild_loop(loop, inits=[*loop.inits, *inits])
    carried = list(new.body.block.args[1 + kept :])
    for value, group in zip(carried, groups):
        if (hint := group[0].memref.name_hint) is not None:
            value.name_hint = f"{hint}_acc"
    group_of = {op: i for i, group in enumerate(groups) for op in group}
    final = _thread_values(new.body.block, group_of, carried)
    block = new.body.block
    _set_yield(block, [*_yield_of(block).operands, *final])
    after: Operation = new
    for result, group in zip(new.results[kept:], groups):
        stores = [op for op in group if isinstance(op, affine.StoreOp)]
        if stores:
            store = affine.StoreOp(result, stores[-1].memref, list(stores[-1].indices), stores[-1].map)
            store.location = stores[-1].location
            block_after = new.parent_block()
            assert block_after is not None
            block_after.insert_op_after(store, after)
            after = store
    return new


def _thread_values(
    block: Block, group_of: dict[Operation, int], current: list[SSAValue]
) -> list[SSAValue]:
    """Replace the grouped loads and stores in `block` (and in the affine.ifs in it) by the
    values carried in `current`; returns the values at the end of the block."""
    current = list(current)
    for op in list(block.ops):
        if op in group_of:
            i = group_of[op]
            if isinstance(op, affine.LoadOp):
                op.result.replace_all_uses_with(current[i])
            else:
                current[i] = op.value
            block.erase_op(op)
        elif isinstance(op, affine.IfOp) and any(inner in group_of for inner in op.walk()):
            touched = sorted({group_of[inner] for inner in op.walk() if inner in group_of})
            then_block = op.then_region.block
            if not op.else_region.blocks:
                op.else_region.add_block(Block([affine.YieldOp.get()]))
            else_block = op.else_region.block
            for branch in (then_block, else_block):
                out = _thread_values(branch, group_of, current)
                _set_yield(branch, [*_yield_of(branch).operands, *(out[i] for i in touched)])
            regions = [op.then_region, op.else_region]
            new_if = affine.IfOp.create(
                operands=list(op.args),
                result_types=[*op.result_types, *(current[i].type for i in touched)],
                properties=dict(op.properties),
                attributes=dict(op.attributes),
                regions=[op.detach_region(r) for r in regions],
            )
            new_if.location = op.location
            block.insert_op_before(new_if, op)
            for old, res in zip(op.results, new_if.results):
                old.replace_all_uses_with(res)
            for i, res in zip(touched, new_if.results[len(op.results) :]):
                current[i] = res
            block.erase_op(op)
    return current


# --------------------------------------------------------------------------------------
# Permuting a band
# --------------------------------------------------------------------------------------


def permute_band(band: Sequence[affine.ForOp], order: Sequence[int]) -> affine.ForOp:
    """Rebuild the first len(order) loops of a perfect band so that position i holds
    loop `band[order[i]]`, with its bounds, step, iv name, location and attributes; the
    loops below and the body move inside, the tag goes to the new outermost loop, which
    takes `band[0]`'s place and is returned. A loop's bounds must use only the ivs of
    loops placed outside it (`bound_dependences` says which)."""
    ivs: dict[SSAValue, SSAValue] = {}
    loops = []
    for old in (band[o] for o in order):
        block = Block(arg_types=[IndexType()])
        new = affine.ForOp.from_region(
            [ivs.get(v, v) for v in old.lowerBoundOperands], [ivs.get(v, v) for v in old.upperBoundOperands],
            [], [], old.lowerBoundMap, old.upperBoundMap, Region(block), step_of(old),
        )
        new.location = old.location
        new.attributes.update({k: v for k, v in old.attributes.items() if k != TAG})
        old_iv = old.body.block.args[0]
        block.args[0].name_hint = old_iv.name_hint
        ivs[old_iv] = block.args[0]
        loops.append(new)
    for depth in range(len(loops) - 1):
        loops[depth].body.block.add_ops([loops[depth + 1], affine.YieldOp.get()])
    innermost = loops[-1].body.block
    for op in list(band[len(order) - 1].body.block.ops):
        op.detach()
        innermost.add_op(op)
    for old_iv, new_iv in ivs.items():
        old_iv.replace_all_uses_with(new_iv)
    root = band[0]
    parent = root.parent_block()
    assert parent is not None
    parent.insert_op_before(loops[0], root)
    move_tag(root, loops[0])
    parent.erase_op(root)
    return loops[0]


def bound_dependences(band: Sequence[affine.ForOp]) -> list[tuple[int, int]]:
    """(inner, outer) band positions where the bounds of loop `inner` use the iv of loop
    `outer` (after tiling, a point loop `%i = %i_t to min(%i_t + 32, 100)` on its tile
    loop): `outer` must stay outside `inner` when the band is permuted, and `inner`
    cannot be jammed when `outer` is unrolled."""
    position = {loop.body.block.args[0]: p for p, loop in enumerate(band)}
    pairs = [
        (q, position[v])
        for q, loop in enumerate(band)
        for v in (*loop.lowerBoundOperands, *loop.upperBoundOperands)
        if v in position
    ]
    return list(dict.fromkeys(pairs))


# --------------------------------------------------------------------------------------
# Unroll-and-jam
# --------------------------------------------------------------------------------------


def unroll_jam_loop(loop: affine.ForOp, factor: int, depth: int) -> tuple[affine.ForOp, affine.ForOp | None]:
    """Unroll `loop` by `factor` (>= 2) and jam the copies: `unroll_loop` makes `factor`
    copies of the loops inside it, which are then fused position by position down to the
    innermost band loop, `depth` loops below `loop`, whose bodies are concatenated copy
    after copy. The loops below may already be split into main and cleanup loops (an
    inner unroll-jam); their bounds must not use `loop`'s iv and they carry no values.
    Returns (main, remainder or None), like `unroll_loop`."""
    main, remainder = unroll_loop(loop, factor)
    block = main.body.block
    loops = [op for op in block.ops if isinstance(op, affine.ForOp)]
    per_copy = len(loops) // factor
    for i in range(per_copy):
        _fuse([loops[k * per_copy + i] for k in range(factor)], depth - 1)
    # What the copies left between the loops: their split points, dead now, and the
    # shifted ivs of non-affine uses, which the fused bodies read.
    first = loops[0]
    between = [op for op in block.ops if not isinstance(op, affine.ForOp) and op is not block.last_op]
    between = [op for op in between if first.is_before_in_block(op)]
    for op in reversed(between):
        if all(not r.uses for r in op.results):
            block.erase_op(op)
            between.remove(op)
    for op in between:
        op.detach()
        block.insert_op_before(op, first)
    return main, remainder


def _fuse(loops: Sequence[affine.ForOp], depth: int) -> None:
    """Fuse loops with the same bounds into the first: the others' ivs read as its iv;
    at depth 0 their bodies follow its body, else the loops inside are fused in turn."""
    keep = loops[0]
    block = keep.body.block
    for other in loops[1:]:
        other.body.block.args[0].replace_all_uses_with(block.args[0])
    if depth == 0:
        end = block.last_op
        assert end is not None
        for other in loops[1:]:
            body = other.body.block
            for op in [op for op in body.ops if op is not body.last_op]:
                op.detach()
                block.insert_op_before(op, end)
    else:
        inner = [[op for op in loop.body.block.ops if isinstance(op, affine.ForOp)] for loop in loops]
        for group in zip(*inner, strict=True):
            _fuse(group, depth - 1)
    for other in loops[1:]:
        parent = other.parent_block()
        assert parent is not None
        parent.erase_op(other)


# --------------------------------------------------------------------------------------
# Linear forms, footprints of accesses, copy nests (loom-pack)
# --------------------------------------------------------------------------------------


class LinearForm:
    """`c + a1*v1 + ... + an*vn`: an affine expression over SSA values (loop ivs, values
    defined above a nest) rather than over map positions, so that subscripts and loop
    bounds taken from different maps can be added, compared and substituted into each
    other. `map_forms` builds them from a map and its operands; `affine_exprs` and
    `bound_map` turn them back into maps."""

    def __init__(self, coeffs: dict[SSAValue, int] | None = None, const: int = 0):
        self.coeffs = {v: a for v, a in (coeffs or {}).items() if a}
        self.const = const

    @staticmethod
    def of(value: SSAValue) -> LinearForm:
        return LinearForm({value: 1})

    def __add__(self, other: LinearForm | int) -> LinearForm:
        if isinstance(other, int):
            return LinearForm(self.coeffs, self.const + other)
        coeffs = dict(self.coeffs)
        for v, a in other.coeffs.items():
            coeffs[v] = coeffs.get(v, 0) + a
        return LinearForm(coeffs, self.const + other.const)

    def __mul__(self, factor: int) -> LinearForm:
        return LinearForm({v: a * factor for v, a in self.coeffs.items()}, self.const * factor)

    def __neg__(self) -> LinearForm:
        return self * -1

    def __sub__(self, other: LinearForm | int) -> LinearForm:
        return self + (-other)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LinearForm) and self.coeffs == other.coeffs and self.const == other.const

    __hash__ = None  # type: ignore[assignment]

    def coeff(self, value: SSAValue) -> int:
        return self.coeffs.get(value, 0)

    def substitute(self, value: SSAValue, form: LinearForm) -> LinearForm:
        """This form with `value` replaced by `form`."""
        rest = LinearForm({v: a for v, a in self.coeffs.items() if v is not value}, self.const)
        return rest + form * self.coeff(value)

    def is_value(self) -> bool:
        """Whether the form is one value, as it is (`%i`)."""
        return self.const == 0 and len(self.coeffs) == 1 and next(iter(self.coeffs.values())) == 1

    def to_expr(self, position: dict[SSAValue, int]) -> AffineExpr:
        """The form as an affine expression whose dim `position[v]` stands for value v."""
        terms = [AffineExpr.dimension(position[v]) * a for v, a in self.coeffs.items()]
        expr = terms[0] if terms else AffineExpr.constant(self.const)
        for term in terms[1:]:
            expr = expr + term
        if terms and self.const:
            expr = expr + self.const
        return simplify(expr, len(position))

    def __str__(self) -> str:
        text = ""
        for v, a in self.coeffs.items():
            term = value_name(v) if abs(a) == 1 else f"{abs(a)} * {value_name(v)}"
            text += (" - " if a < 0 else " + ") + term if text else ("-" if a < 0 else "") + term
        if not text:
            return str(self.const)
        return text + (f" + {self.const}" if self.const > 0 else f" - {-self.const}" if self.const else "")


def value_form(value: SSAValue) -> LinearForm:
    """An index value as a form: an index constant is folded, an `affine.apply` with a
    linear result expanded (recursively), anything else is the value itself."""
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return LinearForm(const=owner.value.value.data)
    if isinstance(owner, affine.ApplyOp) and len(owner.map.data.results) == 1:
        (form,) = map_forms(owner.map.data, owner.mapOperands)
        if form is not None:
            return form
    return LinearForm.of(value)


def map_forms(m: AffineMap, operands: Sequence[SSAValue]) -> list[LinearForm | None]:
    """The results of `m` applied to all its operands (dims, then symbols) as linear
    forms; None for a result that is not linear (a floordiv, ceildiv or mod of a value, a
    product of two values)."""
    values = [value_form(v) for v in operands]

    def form(expr: AffineExpr) -> LinearForm | None:
        match expr:
            case AffineConstantExpr(value=c):
                return LinearForm(const=c)
            case AffineDimExpr(position=p):
                return values[p]
            case AffineSymExpr(position=p):
                return values[m.num_dims + p]
            case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
                a, b = form(lhs), form(rhs)
                if a is None or b is None:
                    return None
                if kind == AffineBinaryOpKind.Add:
                    return a + b
                if kind == AffineBinaryOpKind.Mul:
                    if a.coeffs and b.coeffs:
                        return None
                    return b * a.const if not a.coeffs else a * b.const
                if a.coeffs or b.coeffs or b.const <= 0:
                    return None
                match kind:
                    case AffineBinaryOpKind.FloorDiv:
                        return LinearForm(const=a.const // b.const)
                    case AffineBinaryOpKind.CeilDiv:
                        return LinearForm(const=-(-a.const // b.const))
                    case _:
                        return LinearForm(const=a.const % b.const)
        return None

    return [form(e) for e in m.results]


def form_range(form: LinearForm, known: dict[SSAValue, Range] | None = None) -> Range:
    """[lo, hi] of a form over the values its operands can take (`known` ranges first,
    then `value_range`), None where unbounded."""
    lo: int | None = form.const
    hi: int | None = form.const
    for v, a in form.coeffs.items():
        r = (known or {}).get(v) or value_range(v)
        vlo, vhi = _scale(r, a)
        lo, hi = _add(lo, vlo), _add(hi, vhi)
    return lo, hi


def prune_bounds(
    terms: Sequence[LinearForm], kind: str, known: dict[SSAValue, Range] | None = None
) -> list[LinearForm]:
    """The terms of a `max` (kind "max": lower bounds) or `min` (kind "min": upper
    bounds) without duplicates and without terms that another term provably dominates
    for every value of their operands (`form_range`): `max(%k_t, 0)` is `%k_t` when
    %k_t >= 0."""
    sign = 1 if kind == "max" else -1

    def dominated(t: LinearForm, by: LinearForm) -> bool:
        lo = form_range((by - t) * sign, known)[0]
        return lo is not None and lo >= 0

    kept: list[LinearForm] = []
    for t in terms:
        if any(dominated(t, k) for k in kept):
            continue
        kept = [k for k in kept if not dominated(k, t)] + [t]
    return kept


class FootprintError(ValueError):
    """Why `access_footprint` cannot describe the footprint of an access."""


def iv_bounds(loop: affine.ForOp, within: Sequence[affine.ForOp]) -> tuple[list[LinearForm], list[LinearForm]]:
    """Bounds on `loop`'s iv over all the iterations of the loops `within` (loops around
    `loop`, and `loop` itself): lower terms (the iv is >= each) and exclusive upper terms
    (the iv is < each), over values defined outside `within`. The iv of a loop of `within`
    in a bound is replaced by its own bounds, so the point loop `%k = %k_t2 to
    min(%k_t2 + 4, %k_t + 16, 50)` inside `%k_t2 = %k_t to min(%k_t + 16, 50) step 4` is
    within [%k_t, min(%k_t + 16, 50)). A step is taken into account where the extent is
    constant (`%i_t2 = %i_t to %i_t + 30 step 4` is at most %i_t + 28); otherwise the
    bounds may be loose, never wrong. Raises FootprintError for a bound that is not linear."""
    ivs = {l.body.block.args[0]: l for l in within}

    def forms(m: AffineMap, operands: Sequence[SSAValue]) -> list[LinearForm]:
        results = map_forms(m, operands)
        if any(f is None for f in results):
            raise FootprintError(f"the bounds of loop %{iv_name(loop)} are not linear ({m})")
        return [f for f in results if f is not None]

    def extremes(form: LinearForm, kind: str) -> list[LinearForm]:
        """Terms bounding `form` from below (kind "max") or above (kind "min") over the
        values of the ivs of `within` in it: v >= each low, v <= each high - 1."""
        candidates = [form]
        for v in [v for v in form.coeffs if v in ivs]:
            lows, highs = iv_bounds(ivs[v], within)
            values = lows if (form.coeff(v) > 0) == (kind == "max") else [h - 1 for h in highs]
            candidates = [c.substitute(v, x) for c in candidates for x in values]
        return candidates

    lower = forms(loop.lowerBoundMap.data, loop.lowerBoundOperands)
    upper = forms(loop.upperBoundMap.data, loop.upperBoundOperands)
    step = step_of(loop)
    if step > 1 and len(lower) == 1:
        start = lower[0]
        upper += [start + ((e.const - 1) // step) * step + 1 for u in upper if not (e := u - start).coeffs]
    return (
        prune_bounds([t for f in lower for t in extremes(f, "max")], "max"),
        prune_bounds([t for f in upper for t in extremes(f, "min")], "min"),
    )


@dataclass
class FootprintDim:
    """One subscript of an access over the iterations of a set of loops. The subscript
    is `iv + offset` for the iv of `loop` (None: the subscript is `offset`, fixed while
    those loops run); the footprint along it is `iv + offset` for iv in
    [max(lower), min(upper)), all of it inside the memref, starting at `base + offset`,
    and at most `extent` long."""

    loop: affine.ForOp | None
    offset: LinearForm
    base: LinearForm
    lower: list[LinearForm]
    upper: list[LinearForm]
    extent: int


def access_footprint(access: affine.LoadOp | affine.StoreOp, loops: Sequence[affine.ForOp]) -> list[FootprintDim]:
    """The box of elements `access` touches while the loops `loops` (the loops around
    it, from some level down) run, one FootprintDim per subscript, in terms of values
    defined outside `loops`. Each subscript must be linear, walked by at most one loop
    of `loops` with coefficient 1 (a loop walks one subscript at most), or not walked
    and provably inside the memref; the bounds keep the box inside the memref's static
    shape, so that copying the box reads nothing out of bounds even where the access
    itself is guarded. Raises FootprintError saying which subscript or loop does not fit."""
    mtype = access.memref.type
    assert isinstance(mtype, MemRefType)
    ivs = {l.body.block.args[0]: l for l in loops}
    walked: dict[SSAValue, int] = {}
    dims = []
    forms = map_forms(access.map.data, access.indices)
    for d, (form, size) in enumerate(zip(forms, mtype.get_shape(), strict=True)):
        if form is None:
            raise FootprintError(f"subscript {d} of {describe_access(access)} is not linear")
        if size < 0:
            raise FootprintError(f"dimension {d} of {value_name(access.memref)} is dynamic")
        for v in form.coeffs:
            if v not in ivs and loops and not defined_outside(v, loops[0]):
                raise FootprintError(f"subscript {d} ({form}) uses {value_name(v)}, computed inside the loops")
        inner = [v for v in form.coeffs if v in ivs]
        if not inner:
            lo, hi = form_range(form)
            if lo is None or hi is None or lo < 0 or hi >= size:
                span = "unbounded" if lo is None or hi is None else f"{lo}..{hi}"
                raise FootprintError(
                    f"subscript {d} ({form}), fixed in the tile, may leave the memref ({span}, not 0..{size - 1}): "
                    f"copying would read where the access may not"
                )
            dims.append(FootprintDim(None, form, LinearForm(), [], [], 1))
            continue
        if len(inner) > 1:
            names = " and ".join(value_name(v) for v in inner)
            raise FootprintError(f"subscript {d} ({form}) combines loops {names}")
        (v,) = inner
        if form.coeff(v) != 1:
            raise FootprintError(
                f"subscript {d} ({form}) steps by {form.coeff(v)} along loop {value_name(v)} (only unit strides)"
            )
        if v in walked:
            raise FootprintError(f"loop {value_name(v)} walks both subscript {walked[v]} and subscript {d}")
        walked[v] = d
        offset = form - LinearForm.of(v)
        lows, highs = iv_bounds(ivs[v], loops)
        if len(lows) != 1:
            raise FootprintError(
                f"loop {value_name(v)} has no single lower bound: max({', '.join(map(str, lows))})"
            )
        base = lows[0]
        lower = prune_bounds([base, -offset], "max")
        upper = prune_bounds([*highs, -offset + size], "min")
        for v_out in dict.fromkeys(u for t in (*lower, *upper) for u in t.coeffs):
            if not defined_outside(v_out, loops[0]):
                raise FootprintError(
                    f"the bounds of loop {value_name(v)} use {value_name(v_out)}, computed inside the loops"
                )
        sizes = [hi for u in upper if (hi := form_range(u - base)[1]) is not None]
        if not sizes:
            raise FootprintError(
                f"the footprint along loop {value_name(v)} has no static size: "
                f"min({', '.join(map(str, upper))}) - ({base})"
            )
        dims.append(FootprintDim(ivs[v], offset, base, lower, upper, max(1, min(sizes))))
    return dims


def _positions(forms: Sequence[LinearForm]) -> dict[SSAValue, int]:
    position: dict[SSAValue, int] = {}
    for f in forms:
        for v in f.coeffs:
            position.setdefault(v, len(position))
    return position


def affine_exprs(forms: Sequence[LinearForm]) -> tuple[list[AffineExpr], list[SSAValue]]:
    """The forms as affine expressions over one shared operand list (one dim per value)."""
    position = _positions(forms)
    return [f.to_expr(position) for f in forms], list(position)


def bound_map(forms: Sequence[LinearForm]) -> tuple[AffineMapAttr, list[SSAValue]]:
    """An affine.for bound (a max of lower or a min of upper terms): `%v` as the parser
    reads it (a symbol), a constant, or a map over one dim per value."""
    if len(forms) == 1 and forms[0].is_value():
        return AffineMapAttr(AffineMap(0, 1, (AffineExpr.symbol(0),))), list(forms[0].coeffs)
    exprs, operands = affine_exprs(forms)
    return AffineMapAttr(AffineMap(len(operands), 0, tuple(exprs))), operands


LoopBounds = tuple[Sequence[LinearForm], Sequence[LinearForm]]


def build_affine_nest(
    names: Sequence[str | None],
    bounds: Callable[[list[SSAValue]], Sequence[LoopBounds]],
    body: Callable[[list[SSAValue]], Sequence[Operation]],
) -> affine.ForOp:
    """A perfect nest of unit-step affine.for loops, outermost first, one per name (its
    iv's name hint). `bounds(ivs)` gives each loop's (lower, upper) terms: the iv runs
    from max(lower) to min(upper), terms over values defined above the nest and the ivs
    of the loops around it. `body(ivs)` gives the innermost body (the yield is added)."""
    blocks = [Block(arg_types=[IndexType()]) for _ in names]
    ivs = [b.args[0] for b in blocks]
    for iv, name in zip(ivs, names):
        iv.name_hint = name
    blocks[-1].add_ops([*body(ivs), affine.YieldOp.get()])
    loop: affine.ForOp | None = None
    for block, (lower, upper) in reversed(list(zip(blocks, bounds(ivs), strict=True))):
        if loop is not None:
            block.add_ops([loop, affine.YieldOp.get()])
        lb, lb_operands = bound_map(lower)
        ub, ub_operands = bound_map(upper)
        loop = affine.ForOp.from_region(lb_operands, ub_operands, [], [], lb, ub, Region(block))
    assert loop is not None
    return loop


def retarget_load(
    load: affine.LoadOp, memref: SSAValue, indices: Sequence[AffineExpr], operands: Sequence[SSAValue]
) -> affine.LoadOp:
    """Replace `load` by a load of `memref` at `indices` (expressions over `operands`,
    one dim each), keeping its result's name and uses and its location."""
    new = affine.LoadOp(memref, operands, AffineMapAttr(AffineMap(len(operands), 0, tuple(indices))), load.result.type)
    new.location = load.location
    new.result.name_hint = load.result.name_hint
    parent = load.parent_block()
    assert parent is not None
    parent.insert_op_before(new, load)
    load.result.replace_all_uses_with(new.result)
    parent.erase_op(load)
    return new


# --------------------------------------------------------------------------------------
# Strides of accesses, strip-mining (loom-vectorize)
# --------------------------------------------------------------------------------------


class StrideError(ValueError):
    """An access whose movement along a loop cannot be told (the message says why)."""


@dataclass(frozen=True)
class AccessStride:
    """How an affine load or store moves from one iteration of a loop to the next."""

    #: per subscript, how much it grows per iteration
    coefficients: tuple[int, ...]
    #: elements between the addresses of consecutive iterations (the memref's strides
    #: applied); None when the memref's layout is not static
    stride: int | None

    @property
    def invariant(self) -> bool:
        """The same element in every iteration."""
        return not any(self.coefficients)

    @property
    def contiguous(self) -> bool:
        """Consecutive elements of the last dimension, one per iteration (a vector load)."""
        return self.coefficients[-1:] == (1,) and not any(self.coefficients[:-1]) and self.stride == 1


def access_stride(access: affine.LoadOp | affine.StoreOp, loop: affine.ForOp) -> AccessStride:
    """The stride of `access`, inside `loop`'s body, along `loop`'s iv: `%b[%k, %j]` in a
    loop over %j of a memref<64x128xf32> has coefficients (0, 1) and stride 1; along %k,
    (1, 0) and stride 128. Subscripts are read through `map_forms` (affine.apply and index
    constants expanded). Raises StrideError for a subscript that is not linear in the iv
    (a floordiv or mod of it) or that uses a value computed in the loop by another op."""
    iv = loop.body.block.args[0]
    coefficients = []
    for form in map_forms(access.map.data, access.indices):
        if form is None:
            raise StrideError(f"{describe_access(access)} is not linear in {value_name(iv)}")
        for value in form.coeffs:
            if value is not iv and not defined_outside(value, loop):
                op_name = value.owner.name if isinstance(value.owner, Operation) else "a block argument"
                raise StrideError(f"{describe_access(access)} uses {value_name(value)}, computed in the loop by '{op_name}'")
        coefficients.append(form.coeff(iv))
    mtype = access.memref.type
    assert isinstance(mtype, MemRefType)
    strides = mtype.get_strides()
    stride = None if any(s is None for s in strides) else sum(c * s for c, s in zip(coefficients, strides))
    return AccessStride(tuple(coefficients), stride)


@dataclass(frozen=True)
class StripMine:
    """A unit-step loop cut into chunks of `width` iterations (see `strip_mine`)."""

    #: the full chunks: a loop from `lower` to `upper` stepping by the width; `upper` is
    #: None when there is no full chunk (a constant trip count below the width)
    lower: Bound
    upper: Bound | None
    #: the number of full chunks, when the trip count is constant
    chunks: int | None
    #: the first iteration no chunk covers; None when every iteration is covered
    rest: SSAValue | None
    #: how many iterations are left from `rest`: a constant in (0, width), or an index
    #: value below the width that is <= 0 when none are left
    rest_count: int | SSAValue | None


def strip_mine(loop: affine.ForOp, width: int) -> StripMine:
    """The bounds that run unit-step `loop` in chunks of `width` iterations, and what is
    left over, for a vectorizer or unroller that builds the new loop itself. With a
    constant trip count (`constant_trip_count`: also `%t to %t + 20`), the split is a bound
    map and the remainder constant. Otherwise, over the upper bound's results u (the upper
    bound is their min), the chunks end at the min of `lb + ((u - lb) floordiv width) *
    width`, an affine.min (or affine.apply) of that gives `rest`, and an affine.min of
    `u - rest` and `u - lb` gives `rest_count` (which is then <= 0 for an empty loop).
    The ops computing `rest` and `rest_count` are inserted before `loop`. The lower bound
    must be a single expression.

    ```mlir
    affine.for %j = %jt to min affine_map<(d0) -> (d0 + 32, 100)>(%jt)     // width 8
    // chunks: affine.for %j = %jt to min affine_map<(d0) -> (d0 + 32, d0 + ((-d0 + 100) floordiv 8) * 8)>(%jt) step 8
    %rest = affine.min affine_map<(d0) -> (d0 + 32, d0 + ((-d0 + 100) floordiv 8) * 8)>(%jt)
    %count = affine.min affine_map<(d0, d1) -> (d1 - d0 + 32, -d0 + 100, 32, -d1 + 100)>(%rest, %jt)
    ```
    """
    assert step_of(loop) == 1 and width >= 1
    lb_map, lb_ops = loop.lowerBoundMap.data, list(loop.lowerBoundOperands)
    ub_map, ub_ops = loop.upperBoundMap.data, list(loop.upperBoundOperands)
    assert len(lb_map.results) == 1
    parent = loop.parent_block()
    assert parent is not None
    lower: Bound = (lb_map, lb_ops)
    trips = constant_trip_count(loop)
    if trips is not None:
        chunks, left = divmod(trips, width)
        split = simplify(lb_map.results[0] + chunks * width, lb_map.num_dims, lb_map.num_symbols)
        split_map = AffineMap(lb_map.num_dims, lb_map.num_symbols, (split,))
        upper = (split_map, lb_ops) if chunks else None
        if not left:
            return StripMine(lower, upper, chunks, None, None)
        start: Operation = (
            arith.ConstantOp(IntegerAttr.from_index_int_value(split.value))
            if isinstance(split, AffineConstantExpr)
            else affine.ApplyOp(lb_ops, AffineMapAttr(split_map))
        )
        start.location = loop.location
        parent.insert_op_before(start, loop)
        return StripMine(lower, upper, chunks, start.results[0], left)
    values, ((lo,), his) = unify_operands((lb_map, lb_ops), (ub_map, ub_ops))
    n = len(values)
    split_map = AffineMap(n, 0, tuple(simplify(lo + ((hi - lo) // width) * width, n) for hi in his))
    rest_op: Operation = (
        affine.ApplyOp(values, AffineMapAttr(split_map))
        if len(his) == 1
        else affine.MinOp(values, AffineMapAttr(split_map))
    )
    shift = [AffineExpr.dimension(i + 1) for i in range(n)]
    lo1, his1 = lo.replace_dims_and_symbols(shift, []), [hi.replace_dims_and_symbols(shift, []) for hi in his]
    d0 = AffineExpr.dimension(0)
    counts = tuple(dict.fromkeys(simplify(e, n + 1) for e in [*(hi - d0 for hi in his1), *(hi - lo1 for hi in his1)]))
    count_op = affine.MinOp([rest_op.results[0], *values], AffineMapAttr(AffineMap(n + 1, 0, counts)))
    for new in (rest_op, count_op):
        new.location = loop.location
        parent.insert_op_before(new, loop)
    return StripMine(lower, (split_map, values), None, rest_op.results[0], count_op.result)

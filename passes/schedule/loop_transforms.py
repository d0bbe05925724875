"""Rewrites of affine loops shared by the schedule passes: the mechanics, where the pass
files hold the policy (what to transform, what to refuse, what to say).

Rebuilding a loop with new bounds, step or iter_args; tiling a band (`tile_band`);
cloning a body with a shifted iv, unrolling (`unroll_loop`) and unroll-and-jam
(`unroll_jam_loop`); permuting a band (`permute_band`); hoisting and scalar replacement
(`promote_to_iter_args`); strip-mining for a vectorizer (`strip_mine`); building a nest
from linear-form bounds and retargeting loads (the copy nests of loom-pack).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects import affine, arith, vector
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AffineSetAttr,
    DenseIntOrFPElementsAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    VectorType,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineExpr,
    AffineMap,
)
from xdsl.ir.affine.affine_set import AffineConstraintExpr, AffineSet
from xdsl.traits import IsTerminator

from passes.analysis.affine_forms import LinearForm, bound_map, distribute_divisions, tiles_are_full
from passes.analysis.loop_utils import (
    AFFINE_ACCESSES,
    LOADS,
    MASKED,
    STORES,
    TAG,
    access_memref,
    accessed_type,
    constant_trip_count,
    defined_outside,
    enclosing_loops,
    iv_name,
    move_tag,
    simplify,
    step_of,
    unify_operands,
    used_positions,
)

Bound = tuple[AffineMap, Sequence[SSAValue]]


# --------------------------------------------------------------------------------------
# Rebuilding loops, tiling
# --------------------------------------------------------------------------------------


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
    `%i_t + size*step` when the tiles are all full, `affine_forms.tiles_are_full`; a multi-result `ub` joins
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
        if tiles_are_full(loop, width):
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


def _distribute_divisions(loop: affine.ForOp) -> None:
    """The maps of the accesses and applies in `loop`'s body with their divisions split
    over the parts known to be multiples (`affine_forms.distribute_divisions`): the
    copies of an unrolled body read `(%k + 3) floordiv 9` where %k, stepping by 9, is a
    multiple of 9."""
    for op in loop.body.walk():
        if isinstance(op, (*AFFINE_ACCESSES, affine.ApplyOp)):
            ((prop, start, count),) = _map_operand_groups(op)
            m = op.properties[prop].data
            if any(isinstance(e, AffineBinaryOpExpr) and e.kind in (AffineBinaryOpKind.FloorDiv, AffineBinaryOpKind.Mod)
                   for r in m.results for e in r.dfs()):
                op.properties[prop] = AffineMapAttr(distribute_divisions(m, op.operands[start:start + count]))


def _shift_operand_in_map(op: Operation, index: int, offset: int) -> bool:
    """Rewrite the affine map (or set) that reads operand `index` of `op` so that it reads
    that operand plus `offset`. False when no map of the op reads that operand."""
    for prop, start, count in _map_operand_groups(op):
        if not start <= index < start + count:
            continue
        attr = op.properties[prop]
        m = attr.data
        if isinstance(attr, AffineSetAttr):
            shift = _operand_shift(m.num_dims, m.num_symbols, index - start, offset)
            constraints = tuple(AffineConstraintExpr(c.kind, shift(c.lhs), shift(c.rhs)) for c in m.constraints)
            op.properties[prop] = AffineSetAttr(AffineSet(m.num_dims, m.num_symbols, constraints))
        else:
            op.properties[prop] = AffineMapAttr(shift_map_operand(m, index - start, offset))
        return True
    return False


@functools.lru_cache(maxsize=4096)
def shift_map_operand(m: AffineMap, position: int, offset: int) -> AffineMap:
    """`m` reading its operand `position` (dims first, then symbols) as that operand plus
    `offset` (simplified): the map of an access one iteration of a loop further. Cached:
    unrolling asks for the same shift of the same map in many copies of the body (an
    unroll-and-jam of matmul by 64 x 64 asks 20,000 times, 40% of them again), and the
    simplification is most of the time a copy costs."""
    shift = _operand_shift(m.num_dims, m.num_symbols, position, offset)
    return AffineMap(m.num_dims, m.num_symbols, tuple(shift(e) for e in m.results))


def _operand_shift(num_dims: int, num_symbols: int, position: int, offset: int) -> Callable[[AffineExpr], AffineExpr]:
    dims = [AffineExpr.dimension(i) for i in range(num_dims)]
    syms = [AffineExpr.symbol(i) for i in range(num_symbols)]
    if position < num_dims:
        dims[position] = dims[position] + offset
    else:
        syms[position - num_dims] = syms[position - num_dims] + offset
    return _substitution(dims, syms, num_dims, num_symbols)


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


def unroll_loop(
    loop: affine.ForOp, factor: int, *, promote: bool = False
) -> tuple[affine.ForOp | None, affine.ForOp | None]:
    """Unroll `loop` by `factor` (>= 2): a main loop stepping factor*step whose body is
    `factor` copies of the original (copy k reads the iv as iv + k*step, iter_args chained
    from copy to copy), then, unless the factor divides the trip count, a remainder loop
    with the original body over the iterations left, carrying on the main loop's results.
    With a constant extent the split point is a bound map; otherwise an affine.apply
    (and an affine.min for a multi-result upper bound) before the loop computes
    `lb + ((ub - lb) ceildiv step floordiv factor) * factor * step`, and the remainder
    starts at max(split, lb). A non-constant extent needs a single-result
    lower bound. With `promote`, a main loop left with a single iteration (a factor
    equal to a constant trip count) is replaced by its copies (`promote_single_iteration`)
    and None stands for it. Returns (main, remainder or None)."""
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
    _distribute_divisions(main)
    if promote and trips is not None and trips == factor:
        promote_single_iteration(main)
        return None, None
    if remainder is not None:
        parent.insert_op_after(remainder, main)
        for old, new in zip(main.results, remainder.results):
            old.replace_all_uses_with(new)
        remainder = rebuild_loop(remainder, lower=rem_lower, inits=list(main.results))
    return main, remainder


def promote_single_iteration(loop: affine.ForOp) -> None:
    """Replace `loop`, which runs exactly once (the caller knows), by its body (MLIR's
    promoteIfSingleIteration): the iv reads the lower bound (its operand when the bound
    is one operand, else an affine.apply before the body), the iter_args their inits,
    and the loop's results the values its body yields."""
    parent = loop.parent_block()
    assert parent is not None
    lb_map, lb_ops = loop.lowerBoundMap.data, list(loop.lowerBoundOperands)
    assert len(lb_map.results) == 1
    block = loop.body.block
    iv, *iter_args = block.args
    if iv.uses:
        if lb_map == AffineMap.identity(1) and lb_map.num_symbols == 0:
            value = lb_ops[0]
        else:
            start = affine.ApplyOp(lb_ops, AffineMapAttr(lb_map))
            parent.insert_op_before(start, loop)
            value = start.result
        iv.replace_all_uses_with(value)
    for arg, init in zip(iter_args, loop.inits):
        arg.replace_all_uses_with(init)
    term = _yield_of(block)
    yielded = list(term.operands)
    block.erase_op(term)
    for op in list(block.ops):
        op.detach()
        parent.insert_op_before(op, loop)
    for res, value in zip(loop.results, yielded):
        res.replace_all_uses_with(value)
    parent.erase_op(loop)


# --------------------------------------------------------------------------------------
# Unroll-and-jam
# --------------------------------------------------------------------------------------


def unroll_jam_loop(loop: affine.ForOp, factor: int, depth: int) -> tuple[affine.ForOp, affine.ForOp | None]:
    """Unroll `loop` by `factor` (>= 2) and jam the copies: `unroll_loop` makes `factor`
    copies of the loops inside it, which are then fused position by position down to the
    innermost band loop, `depth` loops below `loop`, whose bodies are concatenated copy
    after copy (at depth 0, `loop` is the innermost band loop: it is only unrolled, and
    whatever loops its body holds are copied whole). The band loops below may already be
    split into main and cleanup loops (an inner unroll-jam); their bounds must not use
    `loop`'s iv and they carry no values. Returns (main, remainder or None), like
    `unroll_loop`."""
    main, remainder = unroll_loop(loop, factor)
    assert main is not None
    block = main.body.block
    loops = [op for op in block.ops if isinstance(op, affine.ForOp)]
    if depth == 0 or not loops:
        # the band's innermost loop: unrolled, and the loops in its body (a reduction loop
        # that loom-hoist gave iter_args, say) are part of the copies, not of the band
        return main, remainder
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


# --------------------------------------------------------------------------------------
# Hoisting, scalar replacement
# --------------------------------------------------------------------------------------


def drop_unused_operands(op: affine.LoadOp | affine.StoreOp | affine.ApplyOp | affine.MinOp) -> None:
    """Rewrite the op's map to take only the operands its results use (the nests of
    convert-loom-to-affine pass every iv to every access), so that the operands say
    what the op depends on."""
    ((prop, start, count),) = _map_operand_groups(op)
    m = op.properties[prop].data
    used = used_positions(m.results, m.num_dims)
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


def promote_to_iter_args(
    loop: affine.ForOp, groups: Sequence[Sequence[Operation]]
) -> affine.ForOp:
    """Scalar replacement. Each group holds the loads and stores (affine.load/store, or
    affine.vector_load/vector_store of one vector type) of one memref element or vector
    whose address is invariant in `loop`, all at the top level of the loop's body or
    under affine.if ops there (no other access to those elements in the loop). The
    element is loaded once before the loop, carried through it as an iter_arg (loads
    read the carried value, stores replace it; an affine.if that stores gets a result),
    and stored once after the loop when the group has a store. A group of
    vector.maskedload/maskedstore under one mask (loaded before the loop with a pass_thru,
    stored after under the mask) is carried whole: the caller checks that the lanes
    outside the mask never reach anything but those lanes. Returns the new loop."""
    inits = []
    for group in groups:
        first = group[0]
        if isinstance(first, MASKED):
            pass_thru = _pass_thru(group, accessed_type(first), loop)
            load = vector.MaskedLoadOp(first.base, list(first.indices), first.mask, pass_thru)
        elif isinstance(first, affine.VectorLoadOp | affine.VectorStoreOp):
            load = affine.VectorLoadOp(first.memref, list(first.indices), first.map, accessed_type(first))
        else:
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
        if (hint := access_memref(group[0]).name_hint) is not None:
            value.name_hint = f"{hint}_acc"
    group_of = {op: i for i, group in enumerate(groups) for op in group}
    final = _thread_values(new.body.block, group_of, carried)
    block = new.body.block
    _set_yield(block, [*_yield_of(block).operands, *final])
    after: Operation = new
    for result, group in zip(new.results[kept:], groups):
        stores = [op for op in group if isinstance(op, STORES)]
        if stores:
            last = stores[-1]
            if isinstance(last, vector.MaskedStoreOp):
                store = vector.MaskedStoreOp(last.base, list(last.indices), last.mask, result)
            else:
                store = type(last)(result, last.memref, list(last.indices), last.map)
            store.location = last.location
            block_after = new.parent_block()
            assert block_after is not None
            block_after.insert_op_after(store, after)
            after = store
    return new


def _pass_thru(group: Sequence[Operation], vtype: VectorType, loop: affine.ForOp) -> SSAValue:
    """The pass_thru of the masked load before the loop: a group load's, when defined
    outside the loop, else a zero vector placed before the loop."""
    for op in group:
        if isinstance(op, vector.MaskedLoadOp) and defined_outside(op.pass_thru, loop):
            return op.pass_thru
    zero = arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(vtype, [0.0] * vtype.get_shape()[0]))
    parent = loop.parent_block()
    assert parent is not None
    parent.insert_op_before(zero, loop)
    return zero.result


def _thread_values(
    block: Block, group_of: dict[Operation, int], current: list[SSAValue]
) -> list[SSAValue]:
    """Replace the grouped loads and stores in `block` (and in the affine.ifs in it) by the
    values carried in `current`; returns the values at the end of the block."""
    current = list(current)
    for op in list(block.ops):
        if op in group_of:
            i = group_of[op]
            if isinstance(op, LOADS):
                # (a masked load's lanes outside the mask only reach lanes its group's
                # masked stores skip: loom-hoist checks; so the carried value serves)
                op.result.replace_all_uses_with(current[i])
            elif isinstance(op, vector.MaskedStoreOp):
                current[i] = op.value_to_store
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
# Strip-mining (loom-vectorize)
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# Building nests (the copy nests of loom-pack)
# --------------------------------------------------------------------------------------


LoopBounds = tuple[Sequence[LinearForm], Sequence[LinearForm]]


def build_affine_nest(
    names: Sequence[str | None],
    bounds: Callable[[list[SSAValue]], Sequence[LoopBounds]],
    body: Callable[[list[SSAValue]], Sequence[Operation]],
    steps: Sequence[int] | None = None,
) -> affine.ForOp:
    """A perfect nest of affine.for loops, outermost first, one per name (its iv's name
    hint), stepping by `steps` (default 1). `bounds(ivs)` gives each loop's (lower, upper)
    terms: the iv runs from max(lower) to min(upper), terms over values defined above the
    nest and the ivs of the loops around it. `body(ivs)` gives the innermost body (the
    yield is added)."""
    blocks = [Block(arg_types=[IndexType()]) for _ in names]
    ivs = [b.args[0] for b in blocks]
    for iv, name in zip(ivs, names):
        iv.name_hint = name
    blocks[-1].add_ops([*body(ivs), affine.YieldOp.get()])
    loop: affine.ForOp | None = None
    for block, (lower, upper), step in reversed(list(zip(blocks, bounds(ivs), steps or [1] * len(names),
                                                         strict=True))):
        if loop is not None:
            block.add_ops([loop, affine.YieldOp.get()])
        lb, lb_operands = bound_map(lower)
        ub, ub_operands = bound_map(upper)
        loop = affine.ForOp.from_region(lb_operands, ub_operands, [], [], lb, ub, Region(block), step)
    assert loop is not None
    return loop


def retarget_load(
    load: affine.LoadOp, memref: SSAValue, indices: Sequence[AffineExpr], operands: Sequence[SSAValue]
) -> affine.LoadOp:
    """Replace `load` by a load of `memref` at `indices` (expressions over `operands`,
    one dim each), keeping its result's name and uses and its location. (Its result has
    `memref`'s element type: where that differs from the old one, the caller fixes the uses.)"""
    element = memref.type.get_element_type() if isinstance(memref.type, MemRefType) else load.result.type
    new = affine.LoadOp(memref, operands, AffineMapAttr(AffineMap(len(operands), 0, tuple(indices))), element)
    new.location = load.location
    new.result.name_hint = load.result.name_hint
    parent = load.parent_block()
    assert parent is not None
    parent.insert_op_before(new, load)
    load.result.replace_all_uses_with(new.result)
    parent.erase_op(load)
    return new

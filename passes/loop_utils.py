"""Nests, bands and loops: what every schedule pass selects and asks about its loops
(the spirit of MLIR's LoopUtils, its queries; the rewrites are in `loop_transforms`).

A *nest* is an outermost `affine.for`; `convert-loom-to-affine` tags it with
`loom.tag = "<op>"` and every schedule pass keeps the tag on the nest's outermost loop.
A *band* is a run of perfectly nested loops: each loop's body is exactly the next loop
(and the terminator).

Here: the tag and nest selection, perfect bands and the bound dependences between their
loops; constant bounds, extents and trip counts (and the expression plumbing they need:
`simplify`, `unify_operands`); invariance and the buffer behind a memref value; the names
remarks use for loops, values and accesses; validation of pass options.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import affine, vector
from xdsl.dialects.builtin import MemRefType, ModuleOp, StringAttr
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)

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
        if enclosing_loops(candidate):
            continue
        if op is None or nest_tag(candidate) == op:
            nests.append(candidate)
    return nests


def enclosing_loops(op: Operation) -> list[affine.ForOp]:
    """The affine.for loops around `op`, outermost first."""
    loops = []
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, affine.ForOp):
            loops.append(parent)
        parent = parent.parent_op()
    return loops[::-1]


def perfect_band(root: affine.ForOp) -> list[affine.ForOp]:
    """The loops perfectly nested from `root` down (root included)."""
    band = [root]
    while True:
        body = [o for o in band[-1].body.block.ops if not isinstance(o, affine.YieldOp)]
        if len(body) == 1 and isinstance(body[0], affine.ForOp) and not body[0].results:
            band.append(body[0])
        else:
            return band


def statement_loops(root: affine.ForOp) -> list[affine.ForOp]:
    """The loops of the nest around its statement (its deepest `affine.store`, or
    `affine.vector_store` / `vector.maskedstore` after loom-vectorize, the last of those), outermost
    first: the perfect band for a nest as convert-loom-to-affine makes it, and the
    compute loops still after loom-pack put copy nests beside them."""
    stores = [o for o in root.walk() if isinstance(o, affine.StoreOp | affine.VectorStoreOp | vector.MaskedStoreOp)]
    if not stores:
        return perfect_band(root)
    # the deepest (the compute's, not a copy nest's or a masked remainder's), the last of those
    depth = {op: len(enclosing_loops(op)) for op in stores}
    loops = enclosing_loops(max(reversed(stores), key=depth.__getitem__))
    return loops[loops.index(root):] if root in loops else perfect_band(root)


def band_at(root: affine.ForOp, depth: int) -> list[affine.ForOp]:
    """The perfect band that starts `depth` loops below `root` (root's own band at 0): after
    a 3-deep band is tiled once, depth 3 is the intra-tile band. Empty when the outermost
    band is not that deep."""
    return perfect_band(root)[depth:]


def loops_of_nest(root: affine.ForOp) -> list[affine.ForOp]:
    """Every affine.for in the nest, outermost first (pre-order)."""
    return [o for o in root.walk() if isinstance(o, affine.ForOp)]


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
# Bounds, extents and trip counts
# --------------------------------------------------------------------------------------


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


def used_positions(exprs: Sequence[AffineExpr], num_dims: int) -> set[int]:
    """The operand positions (dims, then symbols) the expressions read."""
    return {
        e.position if isinstance(e, AffineDimExpr) else num_dims + e.position
        for expr in exprs
        for e in expr.dfs()
        if isinstance(e, AffineDimExpr | AffineSymExpr)
    }


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


# --------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------


def defined_outside(value: SSAValue, loop: Operation) -> bool:
    """Whether `value` is defined outside `loop` (hence invariant in it)."""
    return not loop.is_ancestor(value.owner)


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


# --------------------------------------------------------------------------------------
# Names for remarks
# --------------------------------------------------------------------------------------


def access_memref(op: Operation) -> SSAValue:
    """The memref a load or store (affine, affine vector, vector masked) accesses."""
    return op.base if isinstance(op, vector.MaskedLoadOp | vector.MaskedStoreOp) else op.memref  # type: ignore[attr-defined]


def accessed_type(op: Operation) -> Attribute:
    """The type of the value a load reads or a store writes."""
    if isinstance(op, vector.MaskedStoreOp):
        return op.value_to_store.type
    if isinstance(op, affine.StoreOp | affine.VectorStoreOp):
        return op.value.type
    return op.results[0].type


def iv_name(loop: affine.ForOp) -> str:
    iv = loop.body.block.args[0]
    return iv.name_hint or "?"


def describe_band(band: Sequence[affine.ForOp]) -> str:
    return "(" + ", ".join(iv_name(l) for l in band) + ")"


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
# Option validation
# --------------------------------------------------------------------------------------


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

"""Nests, bands and loops: what every schedule pass selects and asks about its loops
(the spirit of MLIR's LoopUtils, its queries; the rewrites are in `loop_transforms`).

A *nest* is an outermost `affine.for`; `convert-loom-to-affine` tags it with
`loom.tag = "<op>"` and every schedule pass keeps the tag on the nest's outermost loop.
A *band* is a run of perfectly nested loops: each loop's body is exactly the next loop
(and the terminator).

Here: the tag and nest selection (with the errors for a pass that would have nothing to
work on), perfect bands and the bound dependences between their loops; constant bounds,
extents and trip counts (and the expression plumbing they need: `simplify`,
`unify_operands`); invariance and the buffer behind a memref value; the names remarks
use for loops, values and accesses; the size limit of unrolling; validation of pass
options.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from xdsl.dialects import affine, memref, vector
from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.traits import is_side_effect_free
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)

from passes.support.diagnostics import LoomError
from passes.support.remarks import remark

TAG = "loom.tag"

#: the loads and stores that address their memref (`op.memref`) through an affine map of
#: their operands (`op.map`, `op.indices`)
AFFINE_LOADS = (affine.LoadOp, affine.VectorLoadOp)
AFFINE_STORES = (affine.StoreOp, affine.VectorStoreOp)
AFFINE_ACCESSES = (*AFFINE_LOADS, *AFFINE_STORES)
#: vector's masked load and store (loom-vectorize's remainders): their memref is `op.base`,
#: their subscripts the index operands themselves
MASKED = (vector.MaskedLoadOp, vector.MaskedStoreOp)
#: every load and store of the loop nests (`access_memref` and `accessed_type` take each)
LOADS = (*AFFINE_LOADS, vector.MaskedLoadOp)
STORES = (*AFFINE_STORES, vector.MaskedStoreOp)


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


#: loom ops that live among the loops (inserted by the schedule passes), not above them
_BELOW_LOOPS = ("loom.prefetch",)


def outermost_nests(module: Operation) -> list[affine.ForOp]:
    """Every outermost affine.for of the module, in order."""
    return [o for o in module.walk() if isinstance(o, affine.ForOp) and not enclosing_loops(o)]


def tagged_nests(module: Operation, tag: str) -> list[affine.ForOp]:
    """The outermost affine.for loops tagged `tag` (none is fine: a plain query)."""
    return [nest for nest in outermost_nests(module) if nest_tag(nest) == tag]


class SelectionError(LoomError):
    """`select_nests`'s refusal. `reason` is the message without the pass's name in front,
    for a pass that reports it among problems of its own (loom-pack's options)."""

    def __init__(self, pass_name: str | None, reason: str, op: Operation | None):
        super().__init__(f"{pass_name}: {reason}" if pass_name else reason, op)
        self.reason = reason


def select_nests(module: ModuleOp, op: str | None, pass_name: str | None = None) -> list[affine.ForOp]:
    """The nests a schedule pass works on: the outermost affine.for loops tagged `op` when
    given, else all of them. Every schedule pass selects here, so that what would make it
    a silent no-op is an error in one place, for all of them: loom ops still in the module
    and no nest selected (the lowering to affine has not run: the error says which passes
    to put first), and an `op=` tag that no nest has (the error lists the tags there are).
    A module with no nest at all and no loom op (functions without loops) has nothing to
    schedule: a remark. The errors are `SelectionError`s."""
    nests = outermost_nests(module)
    selected = [nest for nest in nests if op is None or nest_tag(nest) == op]
    if selected:
        return selected
    unlowered = unlowered_loom_op(module)
    if unlowered is not None:
        on_tensors = any(isinstance(v.type, TensorType) for v in (*unlowered.operands, *unlowered.results))
        missing = ["loom-bufferize", "convert-loom-to-affine"] if on_tensors else ["convert-loom-to-affine"]
        raise SelectionError(
            pass_name,
            f"the module still holds loom ops ('{unlowered.name}' on {'tensors' if on_tensors else 'memrefs'}): "
            f"the lowering to the affine loop nests that schedule passes work on has not run; "
            f"put {','.join(missing)} before {pass_name or 'the schedule passes'}",
            unlowered,
        )
    if op is not None:
        tags = [t for t in dict.fromkeys(nest_tag(n) for n in nests) if t is not None]
        close = difflib.get_close_matches(op, tags, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        # at the module's first nest (or op): the message is about this module's nests
        where = nests[0] if nests else next(iter(module.ops), None)
        raise SelectionError(pass_name, f"option 'op' is '{op}', but no loop nest is tagged so{hint}; "
                             f"{_tags_present(nests)}", where)
    remark(pass_name or "schedule", None, "the module has no loop nest: nothing to schedule", missed=True)
    return []


def unlowered_loom_op(module: Operation) -> Operation | None:
    """The first loom op of the module that convert-loom-to-affine has yet to lower (a
    loom.matmul, say; loom.prefetch lives among the loops)."""
    return next((o for o in module.walk() if o.name.startswith("loom.") and o.name not in _BELOW_LOOPS), None)


def _tags_present(nests: Sequence[affine.ForOp]) -> str:
    """`the tags present: 'matmul', 'matmul.init'` (and the untagged nests), for an error."""
    if not nests:
        return "the module has no loop nest"
    tags = [f"'{t}'" for t in dict.fromkeys(nest_tag(n) for n in nests) if t is not None]
    untagged = sum(nest_tag(n) is None for n in nests)
    words = [f"the tags present: {', '.join(tags)}"] if tags else []
    if untagged:
        words.append(f"{untagged} untagged nest{'s' * (untagged != 1)}")
    return " and ".join(words)


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
    stores = [o for o in root.walk() if isinstance(o, STORES)]
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


def iteration_number_map(lb: int, step: int) -> AffineMap:
    """`(d0 - lb) floordiv step`: the iteration number of a loop from `lb` by `step`, of
    its iv (loom-pack's `private` slot; loom-parallelize reads it back as the iv)."""
    return AffineMap(1, 0, ((AffineExpr.dimension(0) - lb) // step,))


def used_positions(exprs: Sequence[AffineExpr], num_dims: int) -> set[int]:
    """The operand positions (dims, then symbols) the expressions read."""
    return {
        e.position if isinstance(e, AffineDimExpr) else num_dims + e.position
        for expr in exprs
        for e in expr.dfs()
        if isinstance(e, AffineDimExpr | AffineSymExpr)
    }


def simplify(expr: AffineExpr, num_dims: int, num_symbols: int = 0) -> AffineExpr:
    """The canonical (flattened) form of a pure affine expression; others as they are
    (semi-affine ones, and a division or mod by a non-positive constant, which xDSL's
    flattener refuses with a ValueError and loom-lower-affine refuses with a location)."""
    try:
        return expr.simplify(num_dims, num_symbols)
    except (NotImplementedError, ValueError):
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


def max_trip_count(loop: affine.ForOp) -> int | None:
    """An upper bound on the trip count: the constant one, else the least over the upper
    bound's results that exceed a single lower bound by a constant (a tile's point loop
    `%i = %i_t to min(%i_t + 32, 100)` runs at most 32 times); None when none does."""
    trips = constant_trip_count(loop)
    if trips is not None:
        return trips
    lb, ub = loop.lowerBoundMap.data, loop.upperBoundMap.data
    if len(lb.results) != 1:
        return None
    values, ((lo,), his) = unify_operands((lb, loop.lowerBoundOperands), (ub, loop.upperBoundOperands))
    gaps = [simplify(hi - lo, len(values)) for hi in his]
    bounds = [max(0, -(-g.value // step_of(loop))) for g in gaps if isinstance(g, AffineConstantExpr)]
    return min(bounds, default=None)


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


#: ops with no side effect that xDSL 0.74 does not mark so (no NoMemoryEffect trait)
UNMARKED_PURE = (vector.CreateMaskOp, vector.BroadcastOp, affine.MinOp)


def is_pure(op: Operation) -> bool:
    """Whether `op` has no side effect: xDSL's traits say so, or it is UNMARKED_PURE."""
    return isinstance(op, UNMARKED_PURE) or is_side_effect_free(op)


def defined_outside(value: SSAValue, loop: Operation) -> bool:
    """Whether `value` is defined outside `loop` (hence invariant in it)."""
    return not loop.is_ancestor(value.owner)


# --------------------------------------------------------------------------------------
# Names for remarks
# --------------------------------------------------------------------------------------


def access_memref(op: Operation) -> SSAValue:
    """The memref a load or store (affine, affine vector, vector masked) accesses."""
    return op.base if isinstance(op, MASKED) else op.memref  # type: ignore[attr-defined]


def accessed_type(op: Operation) -> Attribute:
    """The type of the value a load reads or a store writes."""
    if isinstance(op, vector.MaskedStoreOp):
        return op.value_to_store.type
    if isinstance(op, affine.StoreOp | affine.VectorStoreOp | memref.StoreOp):
        return op.value.type
    return op.results[0].type


def line_suffix(op: Operation) -> str:
    """` (line 12)`: where `op` was written, for messages (empty when unknown)."""
    loc = op.location
    line = getattr(getattr(loc, "line", None), "data", None)
    return f" (line {line})" if line is not None else ""


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
# Size limits
# --------------------------------------------------------------------------------------


#: the most ops one unroll or unroll-and-jam may leave in a nest. LLVM's time on one loop
#: body grows with the square of its memory accesses and more (alias queries between them
#: in DSE, GVN and LICM; register allocation of the live values): unroll-jam of a 256^3
#: matmul's i and j by 32 (about 6,000 ops) takes 3.8 s in LLVM, by 64 (about 25,000) 83 s
#: and 740 MB. Past this limit compile time runs to minutes, for register pressure no CPU
#: has (loom-default's largest register tile, 14 x 2 vectors, is a few hundred ops).
MAX_UNROLLED_OPS = 20_000


def op_count(op: Operation) -> int:
    """The ops in `op`, itself and nested ones included."""
    return sum(1 for _ in op.walk())


def check_unrolled_size(pass_name: str, nest: affine.ForOp, estimate: int, what: str,
                        remedy: str = "use smaller factors") -> None:
    """Refuse, before anything is copied, a transformation of `nest` whose result would
    hold more than MAX_UNROLLED_OPS ops (`estimate`, from the body size and the copies)."""
    if estimate > MAX_UNROLLED_OPS:
        raise LoomError(
            f"{pass_name}: {what} would make nest '{nest_tag(nest) or 'untagged'}' about {estimate:,} ops, "
            f"more than the limit of {MAX_UNROLLED_OPS:,} ops per unrolled nest (compile time and memory grow "
            f"with it): {remedy}",
            nest,
        )


# --------------------------------------------------------------------------------------
# Option validation
# --------------------------------------------------------------------------------------


def positive_problem(option: str, values: Sequence[int] | None) -> str | None:
    """What is wrong with an option that must be a list of positive integers, if anything."""
    vals = tuple(values or ())
    if not vals:
        return f"option '{option}' is required (a list of positive integers)"
    if any(not isinstance(v, int) or v < 1 for v in vals):
        return f"option '{option}' must be positive integers, got {list(vals)}"
    return None


def raise_problems(pass_name: str, problems: Sequence[str | None]) -> None:
    """One LoomError naming the pass and every problem found with its options (None: none),
    so that one run shows all there is to fix."""
    found = [p for p in problems if p]
    if found:
        raise LoomError(f"{pass_name}: {'; '.join(found)}")


def permutation_problem(option: str, order: Sequence[int]) -> str | None:
    """What is wrong with an option that must be a permutation of 0..n-1, if anything."""
    vals = tuple(order or ())
    if sorted(vals) != list(range(len(vals))):
        return f"option '{option}' must be a permutation, got {list(vals)}"
    return None

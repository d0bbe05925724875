"""Reads of a buffer in the dot-product layout (loom-pack's `group=G`): each panel row
holds G consecutive k of a column side by side, read at `[..., e floordiv G, r + e mod G]`
with `e` the k offset in the tile. loom-dot puts such reads on the dot-product
instructions; loom-compensate finds the s8 x s8 statement whose operands are read so."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import affine
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineExpr,
    AffineMap,
)

from dialects.layout import static_strides
from passes.analysis.affine_forms import (
    LinearForm,
    expr_form,
    known_multiple,
    map_forms,
    sum_of,
    sum_terms,
    value_form,
)
from passes.analysis.loop_utils import (
    enclosing_loops,
    iv_name,
    used_positions,
    value_name,
)


class NotGrouped(Exception):
    """Why a read (a statement) is not in the grouped layout."""


@dataclass
class GroupedRead:
    """A read in the grouped layout: its map with `e mod G` dropped (the group's start)."""

    load: affine.LoadOp
    start: AffineMap
    e: LinearForm


def grouped_read(load: affine.LoadOp) -> tuple[GroupedRead, int]:
    """A read `[..., e floordiv G, r + e mod G]` as (its group start `[..., e floordiv G, r]`, G)."""
    m = load.map.data
    values = [value_form(v) for v in load.indices]
    what = f"the read of {value_name(load.memref)}"
    quotient, terms = (m.results[-2], sum_terms(m.results[-1])) if len(m.results) >= 2 else (None, [])
    mods = [t for t in terms if isinstance(t[1], AffineBinaryOpExpr) and t[1].kind == AffineBinaryOpKind.Mod]
    if not (isinstance(quotient, AffineBinaryOpExpr) and quotient.kind == AffineBinaryOpKind.FloorDiv
            and isinstance(quotient.rhs, AffineConstantExpr) and len(mods) == 1 and mods[0][0] == 1
            and isinstance(mods[0][1].rhs, AffineConstantExpr) and mods[0][1].rhs.value == quotient.rhs.value):
        raise NotGrouped(f"{what} is not in groups (no `e floordiv G, r + e mod G` subscripts)")
    g = quotient.rhs.value
    e = expr_form(quotient.lhs, values, m.num_dims)
    if e is None or e != expr_form(mods[0][1].lhs, values, m.num_dims):
        raise NotGrouped(f"{what} is not in groups (its floordiv and mod are of different expressions)")
    rest = sum_of([t for t in terms if t is not mods[0]])
    start = AffineMap(m.num_dims, m.num_symbols, (*m.results[:-1], rest))
    if map_forms(AffineMap(m.num_dims, m.num_symbols, (rest,)), list(load.indices))[0] is None:
        raise NotGrouped(f"{what} has a last subscript that is not linear beside e mod {g}")
    return GroupedRead(load, start, e), g


def moves_with(m: AffineMap, operands: list, iv: object, skip: int | None = None) -> bool:
    """Whether a subscript of `m` (but the one at `skip`, counted from the end: -1 the
    last) may change with `iv`: a linear one with a coefficient for it, any other that
    reads it (directly or through an affine.apply)."""
    forms = map_forms(m, operands)
    for index, (expr, form) in enumerate(zip(m.results, forms)):
        if skip is not None and index == len(forms) + skip:
            continue
        if form is not None and form.coeff(iv):
            return True
        if form is None and any(reads_iv(operands[p], iv) for p in used_positions([expr], m.num_dims)):
            return True
    return False


def ignores(op: Operation, iv: object) -> bool:
    """Whether `op` is an affine load or store whose subscripts do not read `iv` (an
    operand its map leaves unused)."""
    return isinstance(op, affine.LoadOp | affine.StoreOp) and not moves_with(op.map.data, list(op.indices), iv)


def reads_iv(value: object, iv: object) -> bool:
    """Whether an index value is `iv` or is computed from it by affine.apply ops."""
    if value is iv:
        return True
    owner = getattr(value, "owner", None)
    return isinstance(owner, affine.ApplyOp) and any(reads_iv(v, iv) for v in owner.mapOperands)


def contiguous_group(load: affine.LoadOp, kv: SSAValue, g: int, start: LinearForm) -> GroupedRead:
    """A read in place whose G elements at each group's start are adjacent in memory (an
    NHWC direct convolution's window, tap (r, s) and channel c at `... + (k floordiv SC) * X
    + k mod SC`, SC a multiple of G; with a stride, tap row r's plane `(k floordiv SC) mod
    sh` beside it): the last subscript, of unit stride, moves by 1 per k of the loop `kv`
    (which runs from `start`, stepping by 1) through kv itself or one `(kv + rest) mod D`,
    and every other term of it and every other subscript reads kv only inside a `(kv +
    rest) floordiv D`, constant over a group, with D a multiple of G and `start + rest`
    one too (no group straddles a change of the quotient). Its vector of G lanes is read at
    the group's start with the read's own map. NotGrouped says why not (without naming
    the read)."""
    m = load.map.data
    layout = static_strides(load.memref.type)
    if layout is None or layout[0][-1] != 1:
        raise NotGrouped("its last dimension is not of unit stride")
    values = [value_form(v) for v in load.indices]

    def aligned(factor: AffineBinaryOpExpr) -> bool:
        """`(kv + rest) floordiv D` or `mod D` with D a multiple of G, `start + rest` too."""
        inner = expr_form(factor.lhs, values, m.num_dims)
        return (inner is not None and inner.coeff(kv) == 1 and isinstance(factor.rhs, AffineConstantExpr)
                and factor.rhs.value % g == 0 and known_multiple(inner.substitute(kv, start)) % g == 0)

    def constant(expr: AffineExpr) -> bool:
        """Whether `expr` takes one value over each group of G k."""
        if isinstance(expr, AffineBinaryOpExpr):
            if expr.kind == AffineBinaryOpKind.FloorDiv and aligned(expr):
                return True
            return constant(expr.lhs) and constant(expr.rhs)
        positions = used_positions([expr], m.num_dims)
        return not any(reads_iv(load.indices[p], kv) for p in positions)

    if not all(constant(e) for e in m.results[:-1]):
        raise NotGrouped("k moves a subscript other than its last but by the quotient of whole groups")
    stride = 0
    for coeff, factor in sum_terms(m.results[-1]):
        if factor is None or constant(factor):
            continue
        form = expr_form(factor, values, m.num_dims)
        if form is not None:
            stride += coeff * form.coeff(kv)
        elif isinstance(factor, AffineBinaryOpExpr) and factor.kind == AffineBinaryOpKind.Mod and aligned(factor):
            stride += coeff
        else:
            raise NotGrouped(f"it reads k other than linearly or through a floordiv or mod where a group of {g} "
                             "may straddle the quotient's change")
    if stride != 1:
        raise NotGrouped(f"its stride along k is {stride}, not 1")
    return GroupedRead(load, m, LinearForm.of(kv))


def group_loop(store: affine.StoreOp, e: LinearForm, loads: list[affine.LoadOp]) -> affine.ForOp:
    """The loop the groups of a statement's reads are along: the innermost loop around
    `store` in `e`, with coefficient 1 and no iter_args, its iv read by `loads` alone
    (beside accesses whose subscripts leave it out), a perfect nest from it down to the
    statement (loom-dot's k, loom-compensate's). NotGrouped says why not."""
    loops = enclosing_loops(store)
    inside = [loop for loop in loops if e.coeff(loop.body.block.args[0])]
    if not inside:
        raise NotGrouped("its groups are not along a loop")
    k = inside[-1]
    kv = k.body.block.args[0]
    if e.coeff(kv) != 1 or k.inits:
        raise NotGrouped(f"loop %{iv_name(k)} walks its groups by {e.coeff(kv)} or carries values")
    if any(u.operation not in loads and not ignores(u.operation, kv) for u in kv.uses):
        raise NotGrouped(f"loop %{iv_name(k)}'s iv is used beside the grouped reads")
    for loop in loops[loops.index(k):-1]:
        if len(list(loop.body.block.ops)) != 2:
            raise NotGrouped(f"loop %{iv_name(loop)} holds more than the next loop")
    return k

"""loom-lower-affine: the affine dialect -> scf + arith + memref (+ vector).

Like MLIR's `-lower-affine`. It exists because xDSL 0.74's own `lower-affine`
(xdsl/transforms/lower_affine.py) is not enough for the loop nests Loom's schedules build:

- it takes only constant, single-result `affine.for` bounds, where tiling makes bounds
  such as `min (d0) -> (d0 + 32, 100)` and `max` lower bounds over dims and symbols;
- it applies `affine.load`/`affine.store` maps to the dims only, while xDSL's parser reads
  `affine.load %m[%i, %j]` with the map `()[s0, s1] -> (s0, s1)` (the indices as symbols),
  so it crashes on IR parsed from text;
- it lowers floordiv/ceildiv/mod to `arith.floordivsi`/`ceildivsi`/`remsi` (the last with
  the wrong sign for a negative dividend), which the LLVM lowering would have to expand;
- it has no `affine.if`, `affine.min`/`affine.max`, `affine.parallel`, vector load/store.

Here every map is applied to all its operands (the first `num_dims` are d0.., the rest
s0..), and floordiv/ceildiv/mod by a positive constant are expanded the MLIR way into
`arith.divsi`/`remsi`/`cmpi`/`select`, so later passes only need plain arith:

```mlir
affine.for %ii = max affine_map<(d0)[s0] -> (d0, s0)>(%i)[%n] to min affine_map<(d0) -> (d0 + 32, 100)>(%i) {
  %v = affine.load %m[%ii * 2 + %j - 1, %j] : memref<?x?xf32>
}
// becomes
%lb = arith.maxsi %i, %n : index
%c32 = arith.constant 32 : index
%a = arith.addi %i, %c32 : index
%c100 = arith.constant 100 : index
%ub = arith.minsi %a, %c100 : index
%c1 = arith.constant 1 : index
scf.for %ii = %lb to %ub step %c1 {
  ... arith.muli / arith.addi ...
  %v = memref.load %m[%r, %j] : memref<?x?xf32>
}
```

What it cannot lower (a floordiv/ceildiv/mod by a non-constant or non-positive divisor,
`affine.parallel` with reductions, an affine op it does not know) is
refused with a `LoomError` pointing at the op. The mechanics (`expand_affine_expr`,
`expand_affine_map`, `expand_min_max`, `expand_integer_set`) are module-level functions
that other passes can import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, TypeVar

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import affine, arith, memref, scf, vector
from xdsl.dialects.builtin import (
    AffineMapAttr,
    IntegerAttr,
    IntegerType,
    LocationAttr,
    ModuleOp,
    UnregisteredOp,
)
from xdsl.ir import Operation, Region, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSet,
    AffineSymExpr,
)
from xdsl.ir.affine.affine_set import AffineConstraintKind
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.traits import IsTerminator

from passes.support.diagnostics import LoomError
from passes.analysis.affine_forms import map_forms, provably_nonnegative


_OpT = TypeVar("_OpT", bound=Operation)


class AffineExpansionError(ValueError):
    """An affine expression that cannot be expanded into arith (the message says why).
    Patterns turn it into a `LoomError` located at the op that holds the expression."""


# --------------------------------------------------------------------------------------
# Mechanics: affine expressions, maps and sets -> arith ops
# --------------------------------------------------------------------------------------


def _divisor(expr: AffineBinaryOpExpr) -> int:
    """The constant positive divisor of a floordiv/ceildiv/mod, or refuse."""
    kind = expr.kind.get_token()
    rhs = constant_value(expr.rhs)
    if rhs is None:
        raise AffineExpansionError(f"cannot lower semi-affine '{expr}': {kind} by a non-constant")
    if rhs <= 0:
        raise AffineExpansionError(f"cannot lower '{expr}': {kind} by non-positive constant {rhs}")
    return rhs


def constant_value(expr: AffineExpr) -> int | None:
    """The value of an expression without dims or symbols (exact integer semantics:
    floordiv rounds down, ceildiv up, mod is non-negative), else None."""
    match expr:
        case AffineConstantExpr(value=v):
            return v
        case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
            a = constant_value(lhs)
            b = constant_value(rhs)
            if a is None or b is None:
                return None
            match kind:
                case AffineBinaryOpKind.Add:
                    return a + b
                case AffineBinaryOpKind.Mul:
                    return a * b
            b = _divisor(expr)
            match kind:
                case AffineBinaryOpKind.FloorDiv:
                    return a // b
                case AffineBinaryOpKind.CeilDiv:
                    return -(-a // b)
                case AffineBinaryOpKind.Mod:
                    return a % b
    return None


def _negated(expr: AffineExpr) -> AffineExpr | None:
    """`e` when expr is `e * -1` (how xDSL spells `-e`), else None."""
    if (
        isinstance(expr, AffineBinaryOpExpr)
        and expr.kind == AffineBinaryOpKind.Mul
        and constant_value(expr.rhs) == -1
    ):
        return expr.lhs
    return None


def _nonnegative(expr: AffineExpr, dims: Sequence[SSAValue], symbols: Sequence[SSAValue]) -> bool:
    """Whether `expr` is >= 0 wherever it is evaluated: a linear form `provably_nonnegative`
    says so of, a mod by a positive constant, or a sum, a product by a positive constant
    or a floordiv/ceildiv by one of such (a direct convolution's `(%k mod 9) floordiv 3`)."""
    if isinstance(expr, AffineBinaryOpExpr):
        kind, lhs, rhs = expr.kind, expr.lhs, expr.rhs
        by_positive = (constant_value(rhs) or 0) > 0  # a product, floordiv, ceildiv or mod by one
        if kind == AffineBinaryOpKind.Add and _nonnegative(lhs, dims, symbols) and _nonnegative(rhs, dims, symbols):
            return True
        if by_positive and (kind == AffineBinaryOpKind.Mod or _nonnegative(lhs, dims, symbols)):
            return True
    operands = [*dims, *symbols]
    (form,) = map_forms(AffineMap(len(dims), len(symbols), (expr,)), operands)
    return form is not None and provably_nonnegative(form)


class _Expander:
    """Emits arith ops for affine expressions at a builder's insertion point, reusing
    the index constants it has already made."""

    def __init__(self, builder: Builder, location: LocationAttr | None = None):
        self.builder = builder
        self.location = location
        self.constants: dict[int, SSAValue] = {}

    def emit(self, op: Operation) -> SSAValue:
        if self.location is not None:
            op.location = self.location
        self.builder.insert(op)
        return op.results[0]

    def constant(self, value: int) -> SSAValue:
        if value not in self.constants:
            self.constants[value] = self.emit(arith.ConstantOp(IntegerAttr.from_index_int_value(value)))
        return self.constants[value]

    def expr(self, expr: AffineExpr, dims: Sequence[SSAValue], symbols: Sequence[SSAValue]) -> SSAValue:
        if (value := constant_value(expr)) is not None:
            return self.constant(value)
        match expr:
            case AffineDimExpr(position=p):
                if p >= len(dims):
                    raise AffineExpansionError(f"d{p} has no operand ({len(dims)} dims given)")
                return dims[p]
            case AffineSymExpr(position=p):
                if p >= len(symbols):
                    raise AffineExpansionError(f"s{p} has no operand ({len(symbols)} symbols given)")
                return symbols[p]
            case AffineBinaryOpExpr(kind=AffineBinaryOpKind.Add, lhs=lhs, rhs=rhs):
                if constant_value(rhs) == 0:
                    return self.expr(lhs, dims, symbols)
                if constant_value(lhs) == 0:
                    return self.expr(rhs, dims, symbols)
                a = self.expr(lhs, dims, symbols)
                if (neg := _negated(rhs)) is not None:  # a + b * -1 -> a - b
                    return self.emit(arith.SubiOp(a, self.expr(neg, dims, symbols)))
                return self.emit(arith.AddiOp(a, self.expr(rhs, dims, symbols)))
            case AffineBinaryOpExpr(kind=AffineBinaryOpKind.Mul, lhs=lhs, rhs=rhs):
                if constant_value(lhs) is not None:  # constant on the right
                    lhs, rhs = rhs, lhs
                factor = constant_value(rhs)
                if factor == 1:
                    return self.expr(lhs, dims, symbols)
                if factor == 0:
                    return self.constant(0)
                # Also a product of two non-constants (semi-affine, legal when one
                # side is a symbol): one arith.muli either way.
                return self.emit(arith.MuliOp(self.expr(lhs, dims, symbols), self.expr(rhs, dims, symbols)))
            case AffineBinaryOpExpr(kind=kind, lhs=lhs):
                divisor = _divisor(expr)
                a = self.expr(lhs, dims, symbols)
                if divisor == 1:
                    return self.constant(0) if kind == AffineBinaryOpKind.Mod else a
                if kind != AffineBinaryOpKind.CeilDiv and _nonnegative(lhs, dims, symbols):
                    # (%j_r - %j_t) floordiv 16 of a packed panel, a direct convolution's
                    # taps: no sign fix-up to emit, and an unsigned division by a constant
                    # is a multiply and a shift
                    op = arith.DivUIOp if kind == AffineBinaryOpKind.FloorDiv else arith.RemUIOp
                    return self.emit(op(a, self.constant(divisor)))
                match kind:
                    case AffineBinaryOpKind.FloorDiv:
                        return self.floordiv(a, divisor)
                    case AffineBinaryOpKind.CeilDiv:
                        return self.ceildiv(a, divisor)
                    case _:
                        return self.mod(a, divisor)
        raise AffineExpansionError(f"unexpected affine expression '{expr}'")

    def floordiv(self, a: SSAValue, divisor: int) -> SSAValue:
        """a floordiv b = a < 0 ? -1 - ((-1 - a) divsi b) : a divsi b"""
        b = self.constant(divisor)
        minus_one = self.constant(-1)
        negative = self.emit(arith.CmpiOp(a, self.constant(0), "slt"))
        dividend = self.emit(arith.SelectOp(negative, self.emit(arith.SubiOp(minus_one, a)), a))
        quotient = self.emit(arith.DivSIOp(dividend, b))
        corrected = self.emit(arith.SubiOp(minus_one, quotient))
        return self.emit(arith.SelectOp(negative, corrected, quotient))

    def ceildiv(self, a: SSAValue, divisor: int) -> SSAValue:
        """a ceildiv b = a <= 0 ? -((-a) divsi b) : ((a - 1) divsi b) + 1"""
        b = self.constant(divisor)
        zero, one = self.constant(0), self.constant(1)
        non_positive = self.emit(arith.CmpiOp(a, zero, "sle"))
        negated = self.emit(arith.SubiOp(zero, a))
        decremented = self.emit(arith.SubiOp(a, one))
        dividend = self.emit(arith.SelectOp(non_positive, negated, decremented))
        quotient = self.emit(arith.DivSIOp(dividend, b))
        negated_quotient = self.emit(arith.SubiOp(zero, quotient))
        incremented_quotient = self.emit(arith.AddiOp(quotient, one))
        return self.emit(arith.SelectOp(non_positive, negated_quotient, incremented_quotient))

    def mod(self, a: SSAValue, divisor: int) -> SSAValue:
        """a mod b = r < 0 ? r + b : r, where r = a remsi b"""
        b = self.constant(divisor)
        remainder = self.emit(arith.RemSIOp(a, b))
        negative = self.emit(arith.CmpiOp(remainder, self.constant(0), "slt"))
        corrected = self.emit(arith.AddiOp(remainder, b))
        return self.emit(arith.SelectOp(negative, corrected, remainder))

    def map(self, affine_map: AffineMap, operands: Sequence[SSAValue]) -> list[SSAValue]:
        n_inputs = affine_map.num_dims + affine_map.num_symbols
        if len(operands) != n_inputs:
            raise AffineExpansionError(
                f"map {affine_map} takes {n_inputs} operands, {len(operands)} given"
            )
        dims, symbols = operands[: affine_map.num_dims], operands[affine_map.num_dims :]
        return [self.expr(e, dims, symbols) for e in affine_map.results]


def expand_affine_expr(
    builder: Builder,
    expr: AffineExpr,
    dim_values: Sequence[SSAValue],
    symbol_values: Sequence[SSAValue],
    location: LocationAttr | None = None,
) -> SSAValue:
    """Insert arith ops computing `expr` (index typed) at the builder's insertion point
    and return its value. floordiv/ceildiv/mod need a constant positive divisor and are
    expanded into divsi/remsi/cmpi/select with exact (rounding-down, non-negative mod)
    semantics; constants are folded. Raises AffineExpansionError on what it cannot do."""
    return _Expander(builder, location).expr(expr, dim_values, symbol_values)


def expand_affine_map(
    builder: Builder,
    affine_map: AffineMap,
    operands: Sequence[SSAValue],
    location: LocationAttr | None = None,
) -> list[SSAValue]:
    """The results of `affine_map` applied to all its operands: the first `num_dims`
    are its dims, the rest its symbols."""
    return _Expander(builder, location).map(affine_map, operands)


def expand_min_max(
    builder: Builder,
    affine_map: AffineMap,
    operands: Sequence[SSAValue],
    kind: Literal["min", "max"],
    location: LocationAttr | None = None,
) -> SSAValue:
    """The min (arith.minsi chain) or max (arith.maxsi chain) of the map's results."""
    expander = _Expander(builder, location)
    values = expander.map(affine_map, operands)
    if not values:
        raise AffineExpansionError(f"the {kind} of a map without results ({affine_map})")
    op = arith.MinSIOp if kind == "min" else arith.MaxSIOp
    result = values[0]
    for value in values[1:]:
        result = expander.emit(op(result, value))
    return result


_PREDICATES = {
    AffineConstraintKind.ge: "sge",
    AffineConstraintKind.le: "sle",
    AffineConstraintKind.eq: "eq",
}


def expand_integer_set(
    builder: Builder,
    integer_set: AffineSet,
    operands: Sequence[SSAValue],
    location: LocationAttr | None = None,
) -> SSAValue:
    """An i1 that is true when the operands satisfy every constraint of the set
    (`e >= 0`, `e <= 0`, `e == 0`), joined with arith.andi; an empty set is true."""
    expander = _Expander(builder, location)
    n_inputs = integer_set.num_dims + integer_set.num_symbols
    if len(operands) != n_inputs:
        raise AffineExpansionError(f"set {integer_set} takes {n_inputs} operands, {len(operands)} given")
    dims, symbols = operands[: integer_set.num_dims], operands[integer_set.num_dims :]
    result: SSAValue | None = None
    for constraint in integer_set.constraints:
        lhs = expander.expr(constraint.lhs, dims, symbols)
        rhs = expander.expr(constraint.rhs, dims, symbols)
        cond = expander.emit(arith.CmpiOp(lhs, rhs, _PREDICATES[constraint.kind]))
        result = cond if result is None else expander.emit(arith.AndIOp(result, cond))
    if result is None:
        result = expander.emit(arith.ConstantOp(IntegerAttr(1, IntegerType(1))))
    return result


# --------------------------------------------------------------------------------------
# Patterns: one per affine op
# --------------------------------------------------------------------------------------


@contextmanager
def _refusing(op: Operation) -> Iterator[None]:
    """Turn an expression this pass cannot expand into a refusal located at `op`."""
    try:
        yield
    except AffineExpansionError as e:
        raise LoomError(f"loom-lower-affine: {e}", op) from None


def _located(new_op: _OpT, op: Operation) -> _OpT:
    """new_op, at op's source location (so that later diagnostics point at the user's line)."""
    new_op.location = op.location
    return new_op


def _index_constant(rewriter: PatternRewriter, value: int, op: Operation) -> SSAValue:
    return rewriter.insert(_located(arith.ConstantOp(IntegerAttr.from_index_int_value(value)), op)).result


class LowerAffineFor(RewritePattern):
    """affine.for -> scf.for: lower bound = max of the lower map's results, upper bound =
    min of the upper map's results, constant step, iter_args carried over."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: affine.ForOp, rewriter: PatternRewriter) -> None:
        step = op.step.value.data  # positive: passes.support.diagnostics verifies it
        with _refusing(op):
            lb = expand_min_max(rewriter, op.lowerBoundMap.data, op.lowerBoundOperands, "max", op.location)
            ub = expand_min_max(rewriter, op.upperBoundMap.data, op.upperBoundOperands, "min", op.location)
        step_value = _index_constant(rewriter, step, op)
        body = rewriter.move_region_contents_to_new_regions(op.body)
        _ensure_terminator(body, lambda: _located(scf.YieldOp(), op))
        new = _located(scf.ForOp(lb, ub, step_value, op.inits, body), op)
        new.attributes.update(op.attributes)
        rewriter.replace(op, new)


class LowerAffineIf(RewritePattern):
    """affine.if -> scf.if on the conjunction of the set's constraints."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: affine.IfOp, rewriter: PatternRewriter) -> None:
        with _refusing(op):
            cond = expand_integer_set(rewriter, op.condition.data, op.args, op.location)
        then_region = rewriter.move_region_contents_to_new_regions(op.then_region)
        else_region = rewriter.move_region_contents_to_new_regions(op.else_region)
        for region in (then_region, else_region):
            _ensure_terminator(region, lambda: _located(scf.YieldOp(), op))
        if _is_empty_body(else_region):
            else_region = Region()
        new = _located(scf.IfOp(cond, op.res.types, then_region, else_region), op)
        new.attributes.update(op.attributes)
        rewriter.replace(op, new)


def _is_empty_body(region: Region) -> bool:
    """A single block holding only a yield of nothing (an else that does nothing)."""
    return (
        len(region.blocks) == 1
        and (only := region.block.first_op) is not None
        and only is region.block.last_op
        and isinstance(only, affine.YieldOp | scf.YieldOp)
        and not only.operands
    )


class LowerAffineParallel(RewritePattern):
    """affine.parallel without reductions -> scf.parallel (each bound group a max/min)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: affine.ParallelOp, rewriter: PatternRewriter) -> None:
        if op.reductions.data or op.res:
            raise LoomError("loom-lower-affine: cannot lower affine.parallel with reductions", op)
        lb_map, ub_map = op.lowerBoundsMap.data, op.upperBoundsMap.data
        lb_groups, ub_groups = op.lowerBoundsGroups.get_values(), op.upperBoundsGroups.get_values()
        if not (len(lb_groups) == len(ub_groups) == len(op.steps) == len(op.body.block.args)):
            raise LoomError(
                "loom-lower-affine: affine.parallel has different numbers of bounds, steps "
                "and induction variables",
                op,
            )
        n_lb = lb_map.num_dims + lb_map.num_symbols
        with _refusing(op):
            lbs = _grouped_bounds(rewriter, op, lb_map, op.map_operands[:n_lb], lb_groups, "max")
            ubs = _grouped_bounds(rewriter, op, ub_map, op.map_operands[n_lb:], ub_groups, "min")
        steps = [_index_constant(rewriter, s.value.data, op) for s in op.steps]
        body = rewriter.move_region_contents_to_new_regions(op.body)
        _ensure_terminator(body, lambda: _located(scf.ReduceOp(), op))
        new = _located(scf.ParallelOp(lbs, ubs, steps, body), op)
        new.attributes.update(op.attributes)
        rewriter.replace(op, new)


def _grouped_bounds(
    rewriter: PatternRewriter,
    op: Operation,
    affine_map: AffineMap,
    operands: Sequence[SSAValue],
    groups: Sequence[int],
    kind: Literal["min", "max"],
) -> list[SSAValue]:
    """One bound per group of consecutive map results (the max or min of the group)."""
    bounds: list[SSAValue] = []
    start = 0
    for size in groups:
        results = affine_map.results[start : start + size]
        group = AffineMap(affine_map.num_dims, affine_map.num_symbols, results)
        bounds.append(expand_min_max(rewriter, group, operands, kind, op.location))
        start += size
    return bounds


class LowerAffineYield(RewritePattern):
    """affine.yield -> scf.yield (in a for or if) or scf.reduce (in a parallel)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: affine.YieldOp, rewriter: PatternRewriter) -> None:
        parent = op.parent_op()
        if isinstance(parent, scf.ParallelOp):
            rewriter.replace(op, _located(scf.ReduceOp(op.arguments), op))
        elif isinstance(parent, scf.ForOp | scf.IfOp | affine.ForOp | affine.IfOp):
            rewriter.replace(op, _located(scf.YieldOp(*op.arguments), op))
        # in an affine.parallel: left for when the parallel is lowered


def _ensure_terminator(region: Region, make: Callable[[], Operation]) -> None:
    """Give a block built without a terminator (by a pass; the parser adds one) the
    empty one that MLIR's implicit affine terminator stands for."""
    for block in region.blocks:
        if block.last_op is None or not block.last_op.has_trait(IsTerminator):
            block.add_op(make())


class LowerAffineApply(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: affine.ApplyOp, rewriter: PatternRewriter) -> None:
        with _refusing(op):
            (value,) = expand_affine_map(rewriter, op.map.data, op.mapOperands, op.location)
        rewriter.replace(op, [], [value])


class LowerAffineMin(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: affine.MinOp, rewriter: PatternRewriter) -> None:
        with _refusing(op):
            value = expand_min_max(rewriter, op.map.data, op.arguments, "min", op.location)
        rewriter.replace(op, [], [value])


class LowerAffineMax(RewritePattern):
    """affine.max: xDSL 0.74 has no op class for it, so it is matched by name (it parses
    as an unregistered op under --allow-unregistered-dialect, with its `map` property)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if _op_name(op) != "affine.max":
            return
        affine_map = op.properties.get("map")
        if not isinstance(affine_map, AffineMapAttr) or len(op.results) != 1:
            raise LoomError("loom-lower-affine: affine.max needs a 'map' property and one result", op)
        with _refusing(op):
            value = expand_min_max(rewriter, affine_map.data, op.operands, "max", op.location)
        rewriter.replace(op, [], [value])


class LowerAffineLoad(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: affine.LoadOp, rewriter: PatternRewriter) -> None:
        with _refusing(op):
            indices = expand_affine_map(rewriter, op.map.data, op.indices, op.location)
        rewriter.replace(op, _located(memref.LoadOp.get(op.memref, indices), op))


class LowerAffineStore(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: affine.StoreOp, rewriter: PatternRewriter) -> None:
        with _refusing(op):
            indices = expand_affine_map(rewriter, op.map.data, op.indices, op.location)
        rewriter.replace(op, _located(memref.StoreOp.get(op.value, op.memref, indices), op))


class LowerAffineVectorLoad(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: affine.VectorLoadOp, rewriter: PatternRewriter) -> None:
        with _refusing(op):
            indices = expand_affine_map(rewriter, op.map.data, op.indices, op.location)
        rewriter.replace(op, _located(vector.LoadOp(op.memref, indices, op.result.type), op))


class LowerAffineVectorStore(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: affine.VectorStoreOp, rewriter: PatternRewriter) -> None:
        with _refusing(op):
            indices = expand_affine_map(rewriter, op.map.data, op.indices, op.location)
        rewriter.replace(op, _located(vector.StoreOp(op.value, op.memref, indices), op))


def _op_name(op: Operation) -> str:
    return op.op_name.data if isinstance(op, UnregisteredOp) else op.name


@dataclass(frozen=True)
class LoomLowerAffinePass(ModulePass):
    name = "loom-lower-affine"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(
            GreedyRewritePatternApplier(
                [
                    LowerAffineFor(),
                    LowerAffineIf(),
                    LowerAffineParallel(),
                    LowerAffineYield(),
                    LowerAffineApply(),
                    LowerAffineMin(),
                    LowerAffineMax(),
                    LowerAffineLoad(),
                    LowerAffineStore(),
                    LowerAffineVectorLoad(),
                    LowerAffineVectorStore(),
                ],
                dce_enabled=False,  # lower, don't clean up: a dead load stays a load
            )
        ).rewrite_module(op)
        for leftover in op.walk():
            if _op_name(leftover).startswith("affine."):
                raise LoomError(f"loom-lower-affine: cannot lower '{_op_name(leftover)}'", leftover)

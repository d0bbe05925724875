"""Index values as linear forms over SSA values, and what they can be.

A `LinearForm` is `c + a1*v1 + ... + an*vn` over SSA values (loop ivs, values defined
above a nest) rather than over map positions, so that subscripts and bounds taken from
different maps can be added, compared and substituted into each other: `value_form` and
`map_forms` read them off index values and maps, `affine_exprs` and `bound_map` turn them
back into maps.

Ranges: `value_range` and `expr_range` bound an index value or a map result by interval
arithmetic (floordiv, mod and affine.min included), `form_range` a linear form term by
term (so that `%i_t + 32 - %i_t` is exactly 32); `prune_bounds` drops the terms of a max
or min that another dominates, `access_in_bounds` says whether an access provably stays
inside its memref.

Accesses: `iv_bounds` and `access_footprint` give the box an access touches over a set of
loops (loom-pack), `access_stride` how it moves along one loop (loom-vectorize).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import gcd

from xdsl.dialects import affine, arith, scf
from xdsl.dialects.builtin import AffineMapAttr, IntegerAttr, MemRefType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)

from passes.analysis.loop_utils import (
    constant_trip_count,
    defined_outside,
    describe_access,
    iv_name,
    simplify,
    step_of,
    used_positions,
    value_name,
)

# --------------------------------------------------------------------------------------
# Linear forms
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
    return [expr_form(e, values, m.num_dims) for e in m.results]


#: what `expr_form` makes of a part that is not linear (a floordiv, ceildiv or mod of a
#: value, a product of two values): the expression and its operands' forms -> a form of
#: its own, or None
Nonlinear = Callable[[AffineBinaryOpExpr, LinearForm, LinearForm], LinearForm | None]


def expr_form(expr: AffineExpr, values: Sequence[LinearForm], num_dims: int,
              nonlinear: Nonlinear | None = None) -> LinearForm | None:
    """`expr` as a linear form, its dims and then its symbols standing for `values`; None
    where it is not linear, unless `nonlinear` gives that part a form (a reader that
    keeps it as a term of its own, as explain prints `i floordiv 2`)."""

    def form(expr: AffineExpr) -> LinearForm | None:
        match expr:
            case AffineConstantExpr(value=c):
                return LinearForm(const=c)
            case AffineDimExpr(position=p):
                return values[p]
            case AffineSymExpr(position=p):
                return values[num_dims + p]
            case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
                a, b = form(lhs), form(rhs)
                if a is None or b is None:
                    return None
                if kind == AffineBinaryOpKind.Add:
                    return a + b
                if kind == AffineBinaryOpKind.Mul and not (a.coeffs and b.coeffs):
                    return b * a.const if not a.coeffs else a * b.const
                if a.coeffs or b.coeffs or b.const <= 0:
                    return nonlinear(expr, a, b) if nonlinear is not None else None
                match kind:
                    case AffineBinaryOpKind.FloorDiv:
                        return LinearForm(const=a.const // b.const)
                    case AffineBinaryOpKind.CeilDiv:
                        return LinearForm(const=-(-a.const // b.const))
                    case _:
                        return LinearForm(const=a.const % b.const)
        return None

    return form(expr)


def sum_terms(expr: AffineExpr) -> list[tuple[int, AffineExpr | None]]:
    """A sum's terms as (coefficient, factor); None is the factor of a constant term."""
    if isinstance(expr, AffineBinaryOpExpr) and expr.kind == AffineBinaryOpKind.Add:
        return sum_terms(expr.lhs) + sum_terms(expr.rhs)
    if isinstance(expr, AffineConstantExpr):
        return [(expr.value, None)]
    if isinstance(expr, AffineBinaryOpExpr) and expr.kind == AffineBinaryOpKind.Mul:
        for factor, scale in ((expr.lhs, expr.rhs), (expr.rhs, expr.lhs)):
            if isinstance(scale, AffineConstantExpr):
                return [(scale.value * coeff, f) for coeff, f in sum_terms(factor)]
    return [(1, expr)]


def sum_of(terms: Sequence[tuple[int, AffineExpr | None]]) -> AffineExpr:
    exprs = [AffineExpr.constant(c) if f is None else f * c for c, f in terms] or [AffineExpr.constant(0)]
    total = exprs[0]
    for e in exprs[1:]:
        total = total + e
    return total


def distribute_divisions(m: AffineMap, operands: Sequence[SSAValue]) -> AffineMap:
    """`m` with its floordivs and mods by a constant b simplified by what is known of
    the numerator N + c (c its constant, N the rest; `known_multiple` says what an operand
    is a multiple of, and a mod by a multiple of g keeps a multiple of g one):
    - the terms of N known to be multiples of b come out exactly: (M + R) floordiv b =
      M/b + R floordiv b, (M + R) mod b = R mod b;
    - when N is a multiple of g, g divides b and 0 <= c < g, the constant cannot carry:
      (N + c) floordiv b = N floordiv b, (N + c) mod b = (N mod b) + c.
    After a k loop that steps by 3 from a multiple of 3 is unrolled by 3, its copies read
    `(%k + 2) floordiv 9`, `((%k + 2) mod 9) floordiv 3` and `(%k + 2) mod 3` (a 3x3
    direct convolution's channel, tap row and tap column): `%k floordiv 9`,
    `(%k mod 9) floordiv 3` and 2, divisions every copy shares instead of its own."""
    multiples = [known_multiple(LinearForm.of(v)) for v in operands]

    def multiple(e: AffineExpr | None) -> int:
        """What e is known to be a multiple of (0: e is 0)."""
        match e:
            case AffineDimExpr(position=p):
                return multiples[p]
            case AffineSymExpr(position=p):
                return multiples[m.num_dims + p]
            case AffineConstantExpr(value=v):
                return abs(v)
            case AffineBinaryOpExpr(kind=AffineBinaryOpKind.Add, lhs=lhs, rhs=rhs):
                return gcd(multiple(lhs), multiple(rhs))
            case AffineBinaryOpExpr(kind=AffineBinaryOpKind.Mul, lhs=lhs, rhs=rhs):
                return multiple(lhs) * multiple(rhs)
            case AffineBinaryOpExpr(kind=AffineBinaryOpKind.Mod, lhs=lhs, rhs=AffineConstantExpr(value=b)):
                return gcd(multiple(lhs), b)
        return 1

    def walk(e: AffineExpr) -> AffineExpr:
        if not isinstance(e, AffineBinaryOpExpr):
            return e
        lhs, rhs = walk(e.lhs), walk(e.rhs)
        if e.kind not in (AffineBinaryOpKind.FloorDiv, AffineBinaryOpKind.Mod) or \
                not isinstance(rhs, AffineConstantExpr) or rhs.value <= 0:
            return AffineBinaryOpExpr(e.kind, lhs, rhs)
        b, mod = rhs.value, e.kind == AffineBinaryOpKind.Mod
        terms = sum_terms(lhs)
        whole = [(c, f) for c, f in terms if f is not None and c and (c * multiple(f)) % b == 0]
        rest = [t for t in terms if t not in whole]
        if whole:
            if mod:
                return walk(sum_of(rest) % b)
            quotient = [(c // gcd(c, b), f if gcd(c, b) == b else f // (b // gcd(c, b))) for c, f in whole]
            return sum_of(quotient) + walk(sum_of(rest) // b)
        constant = sum(c for c, f in terms if f is None)
        varying = [(c, f) for c, f in terms if f is not None]
        g = multiple(sum_of(varying)) if varying else 0
        if varying and constant and g and b % g == 0 and 0 <= constant < g:
            return sum_of(varying) % b + constant if mod else sum_of(varying) // b
        return AffineBinaryOpExpr(e.kind, lhs, rhs)

    return AffineMap(m.num_dims, m.num_symbols,
                     tuple(simplify(walk(r), m.num_dims, m.num_symbols) for r in m.results))


def known_multiple(form: LinearForm) -> int:
    """The largest g known to divide every value the form takes (0: the form is 0). A loop
    iv is a multiple of gcd(its single lower bound's multiple, its step), other values
    of 1: after tiling by 96 and again by 6, `%i_r - %i_t` is a multiple of 6, and so is
    every `min(%i_t + 96, 1020) - %i_r`, so the 6-row tiles are all full."""
    g = abs(form.const)
    for value, coeff in form.coeffs.items():
        g = gcd(g, abs(coeff) * _value_multiple(value))
    return g


def residue(form: LinearForm, g: int) -> int | None:
    """The remainder mod g of every value the form takes, where it is known: 0 for a known
    multiple of g; `c mod g` for `c + (a known multiple of g)`; else None. After tiling k
    of K = 147 by 64, a tile's extent `min(64, 147 - %k_t)` is 64, or 147 - %k_t: always
    1 past a multiple of 2 (K's last pair is one element)."""
    if known_multiple(form) % g == 0:
        return 0
    if known_multiple(form - form.const) % g == 0:
        return form.const % g
    return None


def _value_multiple(value: SSAValue) -> int:
    lower = _lower_bound_form(value)  # None unless value is the iv of a loop
    loop = value.owner.parent_op() if isinstance(value.owner, Block) else None
    return gcd(known_multiple(lower), step_of(loop)) if lower is not None and isinstance(loop, affine.ForOp) else 1


def tiles_are_full(loop: affine.ForOp, width: int) -> bool:
    """Whether `width` divides upper - lower for each upper bound of `loop`: then tiles
    of `width` starting at the lower bound are all full (constant-extent point loops)."""
    if len(loop.lowerBoundMap.data.results) != 1:
        return False
    (lower,) = map_forms(loop.lowerBoundMap.data, loop.lowerBoundOperands)
    uppers = map_forms(loop.upperBoundMap.data, loop.upperBoundOperands)
    if lower is None or any(u is None for u in uppers):
        return False
    return all(known_multiple(u - lower) % width == 0 for u in uppers)  # type: ignore[operator]


def provably_nonnegative(form: LinearForm, steps: int = 8) -> bool:
    """Whether the form is >= 0 wherever it is evaluated, by replacing each loop iv with a
    positive coefficient by its lower bound (affine.for, or scf.for once lowered):
    `%j_r - %j_t` with `%j_r = %j_t to ...` is >= 0. Conservative: False when unsure."""
    for _ in range(steps):
        if not form.coeffs:
            return form.const >= 0
        for value, coeff in form.coeffs.items():
            if coeff > 0 and (lower := _lower_bound_form(value)) is not None:
                form = form.substitute(value, lower)
                break
        else:
            return False
    return False


def _lower_bound_form(value: SSAValue) -> LinearForm | None:
    owner = value.owner
    if not isinstance(owner, Block) or value is not owner.args[0]:
        return None
    loop = owner.parent_op()
    if isinstance(loop, affine.ForOp) and len(loop.lowerBoundMap.data.results) == 1:
        return map_forms(loop.lowerBoundMap.data, loop.lowerBoundOperands)[0]
    if isinstance(loop, scf.ForOp):  # lowered affine loops step forward
        step = value_form(loop.step)
        return value_form(loop.lb) if not step.coeffs and step.const > 0 else None
    return None


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


# --------------------------------------------------------------------------------------
# Value ranges
# --------------------------------------------------------------------------------------


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


def access_in_bounds(op: affine.LoadOp | affine.StoreOp) -> bool:
    """Whether every index of the access provably lies inside the memref's static shape,
    for all values its operands can take: then the access may be moved to where it runs
    when the original would not have (out of a loop that may not run, from under a guard)."""
    mtype = op.memref.type
    if not isinstance(mtype, MemRefType):
        return False
    m = op.map.data
    shape = mtype.get_shape()
    # a vector access covers [index, index + width) along the last dimension
    extra = [0] * len(shape)
    if isinstance(op, affine.VectorLoadOp | affine.VectorStoreOp) and shape:
        vshape = (op.result if isinstance(op, affine.VectorLoadOp) else op.value).type.get_shape()
        if len(vshape) != 1:
            return False
        extra[-1] = vshape[0] - 1
    for expr, size, more in zip(m.results, shape, extra, strict=True):
        lo, hi = expr_range(expr, m, op.indices)
        if size < 0 or lo is None or hi is None or lo < 0 or hi + more >= size:
            return False
    return True


# --------------------------------------------------------------------------------------
# Footprints of accesses (loom-pack)
# --------------------------------------------------------------------------------------


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
        # a start whose value is always r modulo the step (a tile loop's %i_t = 0 to 12540
        # step 6144 for %i_t2 = %i_t to min(%i_t + 6144, 12540) step 6): the iv is too, so
        # below a constant bound C it is at most the last such value before C (12534)
        r = _residue(start, step, ivs)
        if r is not None:
            upper += [LinearForm(const=u.const - 1 - (u.const - 1 - r) % step + 1) for u in upper if not u.coeffs]
    return (
        prune_bounds([t for f in lower for t in extremes(f, "max")], "max"),
        prune_bounds([t for f in upper for t in extremes(f, "min")], "min"),
    )


def _residue(form: LinearForm, modulus: int, ivs: dict[SSAValue, affine.ForOp]) -> int | None:
    """The value of `form` modulo `modulus` where it is the same in every iteration of the
    loops `ivs` maps (each term's iv steps by a multiple of the modulus over its coefficient
    from a start whose residue is known), else None."""
    total = form.const
    for v, a in form.coeffs.items():
        loop = ivs.get(v)
        if loop is None or (a * step_of(loop)) % modulus:
            return None
        starts = map_forms(loop.lowerBoundMap.data, loop.lowerBoundOperands)
        if len(starts) != 1 or starts[0] is None:
            return None
        inner = _residue(starts[0], modulus, ivs)
        if inner is None:
            return None
        total += a * inner
    return total % modulus


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


# --------------------------------------------------------------------------------------
# Strides of accesses (loom-vectorize)
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
        """The same element in every iteration: no subscript moves, or the layout's
        stride along the loop is 0 (a broadcast view, `strided<[0, 1]>` along its rows)."""
        return not any(self.coefficients) or self.stride == 0

    @property
    def contiguous(self) -> bool:
        """Consecutive elements of the last dimension, one per iteration (a vector load)."""
        return self.coefficients[-1:] == (1,) and not any(self.coefficients[:-1]) and self.stride == 1


def access_stride(access: affine.LoadOp | affine.StoreOp, loop: affine.ForOp) -> AccessStride:
    """The stride of `access`, inside `loop`'s body, along `loop`'s iv: `%b[%k, %j]` in a
    loop over %j of a memref<64x128xf32> has coefficients (0, 1) and stride 1; along %k,
    (1, 0) and stride 128. Subscripts are read through `map_forms` (affine.apply and index
    constants expanded; a floordiv or mod of values defined outside the loop is invariant).
    Raises StrideError for a subscript that is not linear in the iv (a floordiv or mod of
    it) or that uses a value computed in the loop by another op."""
    iv = loop.body.block.args[0]
    coefficients = []
    m = access.map.data
    for result, form in zip(m.results, map_forms(m, access.indices)):
        if form is None:
            # a sum of terms, each linear or invariant: (%i - %i_t) floordiv 6 along %j,
            # %j + (%k mod 9) floordiv 3 * 58 along %j (a direct convolution's window tap)
            terms = [sum_of([term]) for term in sum_terms(result)]
            forms = map_forms(AffineMap(m.num_dims, m.num_symbols, tuple(terms)), access.indices)
            linear = LinearForm()
            for term, part in zip(terms, forms):
                if part is not None:
                    linear = linear + part
                    continue
                used = [access.indices[p] for p in used_positions([term], m.num_dims)]
                if not all(defined_outside(v, loop) for v in used):
                    raise StrideError(f"{describe_access(access)} is not linear in {value_name(iv)}")
            form = linear
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

"""Dependence analysis over a band of perfectly nested `affine.for` loops.

Not a pass: the schedule passes ask it whether a transformation keeps every dependence
(loom-interchange, loom-unroll-jam, and loom-tile for full permutability).

For every pair of memory accesses inside the band to the same memref, at least one of
them a write, `band_dependences` gives the direction of the dependence on each band loop,
outermost first: `<` (the sink runs in a later iteration of that loop than the source),
`=`, `>`, or `*` (any). The accesses are `affine.load`/`affine.store` (and
`affine.vector_load`/`vector_store`); their maps are applied to all their operands,
dims and symbols alike (xDSL parses `affine.load %A[%i, %j]` with the map
`()[s0, s1] -> (s0, s1)`), each operand resolved to a band induction variable, a
constant, an `affine.apply` of those, or a value defined outside the band.

```mlir
affine.for %i = 1 to 100 {
  affine.for %j = 0 to 99 {
    %v = affine.load %A[%i - 1, %j + 1] : memref<100x100xf32>   // reads what (i-1, j+1) wrote
    %w = arith.addf %v, %one : f32
    affine.store %w, %A[%i, %j] : memref<100x100xf32>
  }
}
```

gives one dependence, `store %A[%i, %j] -> load %A[%i - 1, %j + 1]` with distance (1, -1),
direction (<, >): iteration (i, j) writes what (i+1, j-1) reads. Swapping the loops would
run the reader first, so `permutation_is_legal(deps, (1, 0))` returns that dependence.

The test is exact for uniform pairs (the same linear subscripts up to a constant offset:
a small linear system over the distances, solved exactly; a loop whose variable is in
no subscript gets `*`). Any other pair (different linear parts, a subscript with a
floordiv/mod of a loop variable, an index computed by a non-affine op or in an inner
loop, `memref.load`/`store` or another op that touches the memref) gets a conservative
`*` on every loop, and so does a pair that reaches one buffer through different memref
values (the buffer and a `memref.subview` of it, say: their subscripts count in different
index spaces), and a pair on a memref whose layout reaches one element from several
index tuples (`strided<[1, 1]>`, a zero stride: `dialects.layout.layout_is_injective`),
where distinct subscripts need not be distinct elements. Distinct buffers never alias:
`dialects.layout.memref_root` follows view ops to a function argument (noalias) or an
allocation. A memref of unknown origin (`arith.select` of two buffers, an `scf.if`'s or
a call's result) may be any buffer: its accesses pair with those of every buffer, `*`
on every loop (with its own accesses through the same value, analysed). The same memref
accessed through different maps is analysed. On a loop with
constant bounds a distance must also be a multiple of the step, shorter than the extent.

Accumulations `x = load M[f]; ...; store x + y, M[f]` (a chain of adds, nothing else
reading the partial sums) at the same address in the same block mark their dependences
`is_reduction`: reordering those iterations only reassociates the sum, which Loom allows
(matmul's `C[i, j] += ...` along k, conv2d's along c, r, s).

The queries, which leave reductions out: `permutation_is_legal(deps, order)`,
`legal_orders(deps, n)`, `unroll_jam_is_legal(deps, loop, depth)` and
`is_fully_permutable(deps, loops)` (tiling).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from xdsl.dialects import affine, arith, vector
from xdsl.dialects.builtin import IntegerAttr, MemRefType, VectorType
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineSymExpr,
)
from xdsl.traits import MemoryEffectKind, get_effects

from dialects.layout import layout_is_injective, memref_root, unknown_origin
from passes.analysis.loop_utils import (
    AFFINE_ACCESSES,
    AFFINE_LOADS,
    AFFINE_STORES,
    MASKED,
    constant_bounds,
    describe_access,
    line_suffix,
    step_of,
    value_name,
)


@dataclass
class Dependence:
    """`sink` touches the memory `source` touched, in a later iteration (or later in the
    same one). `directions[l]` is the sign of (sink's iteration - source's) on band loop
    l: `<` positive, `=` zero, `>` negative, `*` unknown or any. A vector with `*` stands
    for all its expansions; only the lexicographically positive ones (plus the all-`=`
    one) are dependences from source to sink."""

    source: Operation
    sink: Operation
    memref: SSAValue
    directions: tuple[str, ...]
    is_reduction: bool
    #: the exact distance per loop where known (None where the direction is `*`),
    #: None for a conservative dependence
    distance: tuple[int | None, ...] | None = None
    #: why a conservative dependence is assumed, when it is for the memref rather than
    #: the subscripts (a buffer of unknown origin, a layout that overlaps itself)
    because: str = ""

    def describe(self) -> str:
        """`store %A[%i, %j] (line 12) -> load %A[%i - 1, %j + 1] (line 11), direction (<, >)`"""
        kind = " (reduction)" if self.is_reduction else ""
        because = f" ({self.because})" if self.because else ""
        return (
            f"{access_text(self.source)} -> {access_text(self.sink)}, "
            f"direction ({', '.join(self.directions)}){kind}{because}"
        )


# --------------------------------------------------------------------------------------
# Legality queries
# --------------------------------------------------------------------------------------


def permutation_is_legal(deps: Iterable[Dependence], order: Sequence[int]) -> Dependence | None:
    """None when permuting the band's loops to `order` (order[i] = the original loop at
    position i; loops past len(order) stay where they are) keeps every non-reduction
    dependence lexicographically non-negative; else the first dependence it breaks."""
    for dep in deps:
        if dep.is_reduction:
            continue
        full = (*order, *range(len(order), len(dep.directions)))
        if _may_turn_negative(dep.directions, full):
            return dep
    return None


def legal_orders(deps: Sequence[Dependence], n: int) -> list[tuple[int, ...]]:
    """Every permutation of the first n band loops that `permutation_is_legal` accepts."""
    checked = _distinct_non_reductions(deps)
    return [order for order in itertools.permutations(range(n)) if permutation_is_legal(checked, order) is None]


def unroll_jam_is_legal(deps: Iterable[Dependence], loop: int, depth: int) -> Dependence | None:
    """Unrolling band loop `loop` and jamming the copies into the innermost body is legal
    iff moving that loop innermost is: no dependence is carried by it (`<` there, `=`
    outside) with a `>` on a loop inside it. None if legal, else that dependence."""
    order = (*[l for l in range(depth) if l != loop], loop)
    return permutation_is_legal(deps, order)


def is_fully_permutable(deps: Iterable[Dependence], loops: range) -> bool:
    """Whether band loops `loops` (a contiguous range) can be permuted freely, and so
    tiled: every non-reduction dependence not already carried by a loop outside the range
    has only `<` or `=` on it."""
    return all(dep.is_reduction or not _negative_inside(dep.directions, loops) for dep in deps)


def _may_turn_negative(dirs: Sequence[str], order: Sequence[int]) -> bool:
    """Is there an expansion of `dirs` that is lexicographically positive, and negative
    once permuted? Positive: '=' before position p, '<' at p. Negative after: '=' at
    order[0..q), '>' at order[q]. Every other component is free."""
    n = len(dirs)
    for p in range(n):
        if not _has(dirs[p], "<"):
            continue
        if not all(_has(dirs[l], "=") for l in range(p)):
            break
        for q in range(n):
            last = order[q]
            if not _has(dirs[last], ">"):
                continue
            if not all(_has(dirs[order[t]], "=") for t in range(q)):
                break
            equal_before_p = set(range(p))
            equal_before_q = {order[t] for t in range(q)}
            if last != p and last not in equal_before_p and p not in equal_before_q:
                return True
    return False


def _negative_inside(dirs: Sequence[str], loops: range) -> bool:
    """Is there a lexicographically positive expansion with '=' on every loop before
    `loops` and a '>' on one of `loops`? (Its first non-'=' is then a '<' in `loops`
    before that '>'.)"""
    if not all(_has(dirs[l], "=") for l in range(loops.start)):
        return False
    for p in loops:
        if _has(dirs[p], "<") and any(_has(dirs[r], ">") for r in range(p + 1, loops.stop)):
            return True
        if not _has(dirs[p], "="):
            return False
    return False


def _has(direction: str, d: str) -> bool:
    return direction == "*" or direction == d


def _distinct_non_reductions(deps: Iterable[Dependence]) -> list[Dependence]:
    seen: dict[tuple[str, ...], Dependence] = {}
    for dep in deps:
        if not dep.is_reduction:
            seen.setdefault(dep.directions, dep)
    return list(seen.values())


# --------------------------------------------------------------------------------------
# Accesses and their subscripts
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Linear:
    """c + sum coeffs[l] * iv_l + sum params[v] * v, over band ivs and values that are
    fixed during the band (defined outside it)."""

    coeffs: tuple[int, ...]
    params: frozenset[tuple[SSAValue, int]]
    const: int

    @staticmethod
    def constant(n: int, value: int) -> _Linear:
        return _Linear((0,) * n, frozenset(), value)

    def __add__(self, other: _Linear) -> _Linear:
        params = dict(self.params)
        for v, c in other.params:
            params[v] = params.get(v, 0) + c
        return _Linear(
            tuple(a + b for a, b in zip(self.coeffs, other.coeffs)),
            frozenset((v, c) for v, c in params.items() if c),
            self.const + other.const,
        )

    def scaled(self, k: int) -> _Linear:
        return _Linear(
            tuple(k * c for c in self.coeffs),
            frozenset((v, k * c) for v, c in self.params if k * c),
            k * self.const,
        )

    def is_constant(self) -> bool:
        return not any(self.coeffs) and not self.params


@dataclass(frozen=True)
class _Access:
    op: Operation
    memref: SSAValue
    is_write: bool
    #: one linear form per memref dimension; None when not analysable
    subscripts: tuple[_Linear, ...] | None
    #: elements covered along the last dimension (a vector access), 1 for a scalar
    width: int

    @property
    def buffer(self) -> SSAValue | None:
        """The buffer behind the memref (a view's source): accesses to one buffer may
        touch the same element, whatever memref value they go through. None: of unknown
        origin, any buffer."""
        return memref_root(self.memref)


class _Resolver:
    """Linear forms of index values and affine expressions over a band."""

    def __init__(self, band: Sequence[affine.ForOp]):
        self.root = band[0]
        self.ivs = {loop.body.block.args[0]: l for l, loop in enumerate(band)}
        self.n = len(band)

    def value(self, v: SSAValue) -> _Linear | None:
        if v in self.ivs:
            coeffs = [0] * self.n
            coeffs[self.ivs[v]] = 1
            return _Linear(tuple(coeffs), frozenset(), 0)
        owner = v.owner
        if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
            return _Linear.constant(self.n, owner.value.value.data)
        outside = not self.root.is_ancestor(_defining_op(v))
        if isinstance(owner, affine.ApplyOp):
            found = self.expr(owner.map.data.results[0], owner.map.data.num_dims, owner.mapOperands)
            if found is not None or not outside:
                return found
            # a value the band does not change, though not linear in what it is computed
            # from (loom-pack's private slot, `%iv floordiv NB`): a symbol of its own
        if outside:
            return _Linear((0,) * self.n, frozenset({(v, 1)}), 0)
        return None  # varies inside the band in a way the analysis does not follow

    def expr(self, e: AffineExpr, num_dims: int, operands: Sequence[SSAValue]) -> _Linear | None:
        match e:
            case AffineConstantExpr(value=c):
                return _Linear.constant(self.n, c)
            case AffineDimExpr(position=p):
                return self.value(operands[p])
            case AffineSymExpr(position=p):
                return self.value(operands[num_dims + p])
            case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
                a, b = self.expr(lhs, num_dims, operands), self.expr(rhs, num_dims, operands)
                if a is None or b is None:
                    return None
                if kind == AffineBinaryOpKind.Add:
                    return a + b
                if kind == AffineBinaryOpKind.Mul:
                    if a.is_constant():
                        return b.scaled(a.const)
                    if b.is_constant():
                        return a.scaled(b.const)
                    return None
                if a.is_constant() and b.is_constant() and b.const > 0:
                    x, y = a.const, b.const
                    if kind == AffineBinaryOpKind.FloorDiv:
                        return _Linear.constant(self.n, x // y)
                    if kind == AffineBinaryOpKind.CeilDiv:
                        return _Linear.constant(self.n, -(-x // y))
                    return _Linear.constant(self.n, x % y)
        return None


def _defining_op(v: SSAValue) -> Operation:
    if isinstance(v, BlockArgument):
        parent = v.block.parent_op()
        assert parent is not None
        return parent
    return v.owner  # type: ignore[return-value]


def _accesses(band: Sequence[affine.ForOp]) -> list[_Access]:
    resolver = _Resolver(band)
    found: list[_Access] = []
    for op in band[-1].body.walk():
        if isinstance(op, AFFINE_ACCESSES):
            m = op.map.data
            subs = [resolver.expr(e, m.num_dims, op.indices) for e in m.results]
            width = 1
            if isinstance(op, affine.VectorLoadOp | affine.VectorStoreOp):
                vtype = (op.result if isinstance(op, affine.VectorLoadOp) else op.value).type
                assert isinstance(vtype, VectorType)
                shape = vtype.get_shape()
                width = shape[0] if len(shape) == 1 else 0  # 0: not analysed
            analysable = all(s is not None for s in subs) and width > 0
            found.append(_Access(
                op, op.memref, isinstance(op, AFFINE_STORES),
                tuple(subs) if analysable else None, max(width, 1),  # type: ignore[arg-type]
            ))
            continue
        if isinstance(op, MASKED):
            # its indices as they are, its full width (the mask only leaves lanes out)
            n = len(op.indices)
            subs = [resolver.expr(AffineExpr.dimension(i), n, op.indices) for i in range(n)]
            vtype = (op.result if isinstance(op, vector.MaskedLoadOp) else op.value_to_store).type
            found.append(_Access(
                op, op.base, isinstance(op, vector.MaskedStoreOp),
                tuple(subs) if all(x is not None for x in subs) else None,  # type: ignore[arg-type]
                vtype.get_shape()[0],
            ))
            continue
        effects = get_effects(op)
        if effects is not None and not any(
            e.kind in (MemoryEffectKind.READ, MemoryEffectKind.WRITE) for e in effects
        ):
            continue
        # any other op that reads or writes a memref it is given: not analysed
        writes = effects is None or any(e.kind == MemoryEffectKind.WRITE for e in effects)
        for operand in op.operands:
            if isinstance(operand.type, MemRefType):
                found.append(_Access(op, operand, writes, None, 1))
    return found


# --------------------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------------------


def _accumulations(accesses: Sequence[_Access]) -> set[Operation]:
    """Loads and stores that form `x = load M[f]; ...; store x + y, M[f]` pairs in one
    block, the partial sum used by nothing but the chain of adds."""
    members: set[Operation] = set()
    loads = [a for a in accesses if isinstance(a.op, AFFINE_LOADS) and a.subscripts is not None]
    for st in accesses:
        if not isinstance(st.op, AFFINE_STORES) or st.subscripts is None:
            continue
        block = st.op.parent_block()
        for ld in loads:
            if (
                ld.memref is st.memref
                and ld.subscripts == st.subscripts
                and ld.width == st.width
                and ld.op.parent_block() is block
                and ld.op.is_before_in_block(st.op)
                and _chains_to(st.op.value, ld.op.results[0], block)
            ):
                members.update((ld.op, st.op))
    return members


def _chains_to(value: SSAValue, loaded: SSAValue, block: Block | None) -> bool:
    """`value` is `loaded` plus other terms through single-use adds in `block`."""
    if not value.has_one_use():
        return False
    if value is loaded:
        return True
    op = value.owner
    if not isinstance(op, Operation) or op.parent_block() is not block:
        return False
    if isinstance(op, arith.AddfOp | arith.AddiOp):
        terms = [op.lhs, op.rhs]
    elif isinstance(op, vector.FMAOp):
        terms = [op.acc]
    else:
        return False
    return sum(_chains_to(t, loaded, block) for t in terms) == 1


# --------------------------------------------------------------------------------------
# Pairs
# --------------------------------------------------------------------------------------


def band_dependences(band: list[affine.ForOp]) -> list[Dependence]:
    """The dependences between the memory accesses inside the perfect band `band`
    (outermost loop first), with one direction per band loop."""
    accesses = _accesses(band)
    reductions = _accumulations(accesses)
    bounds = [_trip_bounds(loop) for loop in band]
    deps: list[Dependence] = []
    for a, b in _pairs(accesses):
        if not (a.is_write or b.is_write) or (a is b and not a.is_write):
            continue
        reduction = a.op in reductions and b.op in reductions and a.subscripts == b.subscripts and a.width == b.width
        deps.extend(_pair_dependences(a, b, bounds, reduction))
    return deps


def _pairs(accesses: Sequence[_Access]) -> Iterable[tuple[_Access, _Access]]:
    """The pairs of accesses that may touch one element, each in program order (an access
    with itself included): those of one buffer, and those of a buffer of unknown origin
    with every other. The pairs of distinct buffers, most of an unrolled body's n^2, are
    never looked at."""
    groups: dict[SSAValue | None, list[int]] = {}
    for position, a in enumerate(accesses):
        groups.setdefault(a.buffer, []).append(position)
    anywhere = groups.pop(None, [])
    for members in (*groups.values(), anywhere):
        for i, first in enumerate(members):
            for second in members[i:]:
                yield accesses[first], accesses[second]
    for members in groups.values():
        for first, second in itertools.product(members, anywhere):
            yield accesses[min(first, second)], accesses[max(first, second)]


def _trip_bounds(loop: affine.ForOp) -> tuple[int, int] | None:
    """(span, step) of a loop with constant bounds: distances are multiples of the step,
    smaller than the span in absolute value."""
    bounds = constant_bounds(loop)
    if bounds is None:
        return None
    return bounds[1] - bounds[0], step_of(loop)


def _pair_dependences(
    a: _Access, b: _Access, bounds: Sequence[tuple[int, int] | None], reduction: bool
) -> list[Dependence]:
    n = len(bounds)
    rows = _uniform_rows(a, b)
    if rows is None:
        return [Dependence(a.op, b.op, a.memref, ("*",) * n, False, because=_memref_reason(a, b))]
    deps = []
    for distance in _solutions(rows, tuple(bounds)):
        dirs = tuple("*" if d is None else "<" if d > 0 else ">" if d < 0 else "=" for d in distance)
        pos, neg = _lex_possible(dirs, "<"), _lex_possible(dirs, ">")
        all_equal = all(_has(d, "=") for d in dirs)
        if pos or (all_equal and a is not b):
            deps.append(Dependence(a.op, b.op, a.memref, dirs, reduction, distance))
        if neg and a is not b:
            flipped = tuple({"<": ">", ">": "<"}.get(d, d) for d in dirs)
            back = tuple(None if d is None else -d for d in distance)
            deps.append(Dependence(b.op, a.op, a.memref, flipped, reduction, back))
    return _unique(deps)


def _memref_reason(a: _Access, b: _Access) -> str:
    """Why the pair's memrefs alone make its dependence conservative, if they do."""
    unknown = next((v for v in (a.memref, b.memref) if memref_root(v) is None), None)
    if unknown is not None:
        return f"{value_name(unknown)}, {unknown_origin(unknown)}, may be any buffer"
    if a.memref is b.memref and not layout_is_injective(a.memref.type):  # type: ignore[arg-type]
        return f"the layout of {value_name(a.memref)} reaches some elements from several indices"
    return ""


def _uniform_rows(a: _Access, b: _Access) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] | None:
    """The equations on the distance d = (b's iteration - a's): per subscript, its
    coefficients and the constants it may equal (several along a vector's last
    dimension). None when the pair is not uniform (or not analysable)."""
    if a.memref is not b.memref or a.subscripts is None or b.subscripts is None:
        return None  # (through different views of the buffer: different index spaces)
    if not layout_is_injective(a.memref.type):  # type: ignore[arg-type]
        return None  # distinct subscripts may be one element
    if len(a.subscripts) != len(b.subscripts):
        return None
    rows = []
    last = len(a.subscripts) - 1
    for r, (fa, fb) in enumerate(zip(a.subscripts, b.subscripts)):
        if fa.coeffs != fb.coeffs or fa.params != fb.params:
            return None
        # fa(Ia) + ta == fb(Ib) + tb  <=>  coeffs . d == fa.const - fb.const + ta - tb
        base = fa.const - fb.const
        if r == last and (a.width > 1 or b.width > 1):
            rhs = [base + ta - tb for ta in range(a.width) for tb in range(b.width)]
            rows.append((fa.coeffs, tuple(sorted(set(rhs)))))
        else:
            rows.append((fa.coeffs, (base,)))
    return tuple(rows)


@functools.lru_cache(maxsize=1 << 16)
def _solutions(
    rows: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...], bounds: tuple[tuple[int, int] | None, ...]
) -> tuple[tuple[int | None, ...], ...]:
    """The integer distance vectors solving the equations (None: unconstrained or not
    pinned down), one per choice of right-hand sides that has a solution. Cached: the
    copies of an unrolled body pair up into the same few systems (the accesses of a
    16 x 16 register tile make 98,000 pairs and 500 distinct systems)."""
    n = len(bounds)
    found = []
    for rhs in itertools.product(*(values for _, values in rows)):
        eqs = [(list(map(Fraction, coeffs)), Fraction(c)) for (coeffs, _), c in zip(rows, rhs)]
        for l, b in enumerate(bounds):
            if b is not None and b[0] <= b[1]:  # at most one iteration: distance 0
                eqs.append(([Fraction(int(k == l)) for k in range(n)], Fraction(0)))
        distance = _solve(eqs, n)
        if distance is not None and all(
            d is None or b is None or (d % b[1] == 0 and abs(d) < b[0]) for d, b in zip(distance, bounds)
        ):
            found.append(distance)
    return tuple(found)


def _solve(eqs: list[tuple[list[Fraction], Fraction]], n: int) -> tuple[int | None, ...] | None:
    """Gauss-Jordan elimination: None when there is no (integer) solution, else each
    variable's value where the system fixes it, None where it does not."""
    rows = [(list(c), r) for c, r in eqs]
    pivots: list[int] = []
    for col in range(n):
        at = next((i for i in range(len(pivots), len(rows)) if rows[i][0][col] != 0), None)
        if at is None:
            continue
        rows[len(pivots)], rows[at] = rows[at], rows[len(pivots)]
        pc, pr = rows[len(pivots)]
        pc, pr = [x / pc[col] for x in pc], pr / pc[col]
        rows[len(pivots)] = (pc, pr)
        for i in range(len(rows)):
            if i != len(pivots) and rows[i][0][col] != 0:
                f = rows[i][0][col]
                rows[i] = ([x - f * y for x, y in zip(rows[i][0], pc)], rows[i][1] - f * pr)
        pivots.append(col)
    if any(not any(c) and r != 0 for c, r in rows[len(pivots):]):
        return None
    values: list[int | None] = [None] * n
    for row, col in enumerate(pivots):
        coeffs, rhs = rows[row]
        if any(coeffs[k] for k in range(n) if k != col):
            continue  # tied to an unconstrained variable
        if rhs.denominator != 1:
            return None
        values[col] = int(rhs)
    return tuple(values)


def _lex_possible(dirs: Sequence[str], first: str) -> bool:
    """Can an expansion of dirs have `first` as its first non-'=' component?"""
    for d in dirs:
        if _has(d, first):
            return True
        if not _has(d, "="):
            return False
    return False


def _unique(deps: list[Dependence]) -> list[Dependence]:
    seen = set()
    out = []
    for d in deps:
        key = (id(d.source), id(d.sink), d.directions, d.distance)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


# --------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------


def access_text(op: Operation) -> str:
    """`store %A[%i, %j + 1] (line 12)`: the access as written, for messages."""
    if isinstance(op, AFFINE_ACCESSES):
        text = f"{op.name.removeprefix('affine.')} {describe_access(op)}"  # type: ignore[arg-type]
    else:
        memrefs = [value_name(v) for v in op.operands if isinstance(v.type, MemRefType)]
        text = f"{op.name} on {', '.join(memrefs)}"
    return f"{text}{line_suffix(op)}"

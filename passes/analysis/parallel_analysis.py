"""Whether the iterations of one loop may run at once: `carried_dependence(loop)`.

Unlike `dependences.band_dependences`, which needs a perfect band and gives a direction
per loop, this asks one question of any loop, whatever is nested in it (copy nests beside
a compute nest, unrolled and vectorized bodies, iter_args of inner loops): may two
different iterations of `loop` touch the same element, one of them writing it?

Each access inside the loop (affine loads and stores, their vector forms, vector masked
loads and stores, memref.load/store) is read as one linear form per subscript over values
fixed while the loop runs, its own iv among them, plus an interval that the ivs of the
loops inside it add: the point loop `%i = %i_r to %i_r + 14` turns `%c[%i, %j]` into
`%i_r + [0, 13]` along dimension 0. Two accesses of one buffer are independent across
iterations when along some dimension both are `c * %iv + f + [lo, hi]` with the same
`c != 0` and the same `f`, and the union of their intervals is shorter than `|c| * step`:
then two different iterations touch disjoint slices of that dimension. A pair of one write
and any access (the write and itself included) that fails this on every dimension is a
carried dependence; so is anything the analysis cannot read (a subscript computed by an
op it does not follow, an op that may touch memory it does not see, two views of one
buffer, a memref of unknown origin), conservatively. iter_args on the loop itself carry
values, and an allocation inside it would have to fail per thread: both are refused too.

Reads never conflict with reads; `loom.prefetch` is a hint with no effect on values.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from xdsl.dialects import affine, memref
from xdsl.dialects.builtin import MemRefType, VectorType
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineSymExpr,
)
from xdsl.traits import MemoryEffectKind, get_effects

from dialects.layout import memref_root, unknown_origin
from dialects.loom import PrefetchOp
from passes.analysis.affine_forms import FootprintError, LinearForm, iv_bounds, map_forms, value_form
from passes.analysis.dependences import access_text
from passes.analysis.loop_utils import (
    AFFINE_ACCESSES,
    MASKED,
    STORES,
    accessed_type,
    constant_bounds,
    defined_outside,
    enclosing_loops,
    is_pure,
    iteration_number_map,
    iv_name,
    step_of,
    value_name,
)

#: the attribute that carries the thread count of a parallel loop from loom-parallelize to
#: loom-lower-parallel
NUM_THREADS = "loom.num_threads"

_PLAIN = (memref.LoadOp, memref.StoreOp)
_WRITES = (*STORES, memref.StoreOp)


@dataclass(frozen=True)
class _Slice:
    """One subscript over an iteration of the loop: `form + [lo, hi]`, the form over
    values fixed while the loop runs (its iv included)."""

    form: LinearForm
    lo: int
    hi: int


@dataclass
class _Touch:
    op: Operation
    memref: SSAValue
    is_write: bool
    #: one slice per subscript, None for a subscript the analysis cannot read; None for
    #: an op whose subscripts are not known at all
    slices: tuple[_Slice | None, ...] | None
    #: per subscript, whether its slice is the loop's iteration number read as its iv
    #: (`_iteration_number`): comparable only with another such subscript
    numbered: tuple[bool, ...] = ()

    @cached_property
    def root(self) -> SSAValue | None:
        """The buffer behind the memref (`memref_root`), looked up once per access."""
        return memref_root(self.memref)


def carried_dependence(loop: affine.ForOp) -> str | None:
    """Why two iterations of `loop` may conflict, for a message; None when they cannot
    (the loop may run its iterations in parallel, in any order)."""
    if loop.results:
        return f"loop %{iv_name(loop)} carries values from one iteration to the next (iter_args)"
    touches = []
    for op in loop.body.walk():
        if isinstance(op, memref.AllocOp):
            return (f"it allocates {value_name(op.memref)} in its body (a temporary each thread would "
                    "allocate, and could not report failing to)")
        found = _touch(op, loop)
        if isinstance(found, str):
            return found
        if found is not None:
            touches.append(found)
    step = step_of(loop)
    iv = loop.body.block.args[0]
    for i, a in enumerate(touches):
        for b in touches[i:]:
            if not (a.is_write or b.is_write):
                continue
            why = _conflict(a, b, iv, step)
            if why is not None:
                return why
    return None


def _touch(op: Operation, loop: affine.ForOp) -> _Touch | str | None:
    """What `op` accesses, or why it is beyond the analysis; None for an op that touches
    no memory."""
    if isinstance(op, PrefetchOp) or is_pure(op):
        return None
    if isinstance(op, AFFINE_ACCESSES):
        forms: list[LinearForm | None] = map_forms(op.map.data, op.indices)  # type: ignore[arg-type]
        iterations = [_group_number(e, op.map.data.num_dims, list(op.indices), loop) if f is None
                      else _iteration_number(f, loop) for f, e in zip(forms, op.map.data.results)]
        numbered = tuple(n is not None for n in iterations)
        forms = [f if n is None else n for f, n in zip(forms, iterations)]
        mem = op.memref
    elif isinstance(op, MASKED):
        forms, mem = [value_form(v) for v in op.indices], op.base
    elif isinstance(op, _PLAIN):
        forms, mem = [value_form(v) for v in op.indices], op.memref
    else:
        effects = get_effects(op)
        touches_memory = effects is None or any(
            e.kind in (MemoryEffectKind.READ, MemoryEffectKind.WRITE) for e in effects
        )
        if not touches_memory:
            return None
        memrefs = [v for v in op.operands if isinstance(v.type, MemRefType)]
        if effects is None and not memrefs:
            if op.regions:
                return None  # its ops are walked themselves
            return f"'{op.name}' in the loop may touch any memory"
        if len(memrefs) != 1:
            return (f"'{op.name}' in the loop touches {', '.join(value_name(v) for v in memrefs) or 'memory'} "
                    "in a way the analysis does not follow")
        writes = effects is None or any(e.kind == MemoryEffectKind.WRITE for e in effects)
        return _Touch(op, memrefs[0], writes, None)
    inner = enclosing_loops(op)
    inner = inner[inner.index(loop) + 1:]  # the loops between `loop` and the access
    slices = tuple(_slice(f, inner, loop) if f is not None else None for f in forms)
    width = _width(op)
    if width > 1 and slices and slices[-1] is not None:
        last = slices[-1]
        slices = (*slices[:-1], _Slice(last.form, last.lo, last.hi + width - 1))
    return _Touch(op, mem, isinstance(op, _WRITES), slices,
                  numbered if isinstance(op, AFFINE_ACCESSES) else (False,) * len(slices))


def _iteration_number(form: LinearForm, loop: affine.ForOp) -> LinearForm | None:
    """A subscript that is the loop's iteration number, `%slot` computed first in its body
    as `(%iv - lb) floordiv step` (a buffer with a slot per iteration: loom-pack's
    `private`), read as the form `%iv`: they differ between two iterations alike, so the
    analysis may take one for the other (only beside another such subscript: `numbered`)."""
    if len(form.coeffs) != 1 or form.const:
        return None
    [(value, c)] = form.coeffs.items()
    apply = value.owner
    iv = loop.body.block.args[0]
    if not (isinstance(apply, affine.ApplyOp) and apply.parent_op() is loop and list(apply.mapOperands) == [iv]):
        return None
    bounds = constant_bounds(loop)
    if bounds is None or apply.map.data != iteration_number_map(bounds[0], step_of(loop)):
        return None
    return LinearForm({iv: c})


def _group_number(expr: AffineExpr, num_dims: int, operands: list[SSAValue], loop: affine.ForOp) -> LinearForm | None:
    """A subscript `%iv floordiv G` of a loop that steps by G from a multiple of G (loom-pack's
    grouped copy, a group per iteration: `k_cp floordiv 4`): its iteration number plus a
    constant, read as the form `%iv` like `_iteration_number`'s slot."""
    iv, step = loop.body.block.args[0], step_of(loop)
    if not (isinstance(expr, AffineBinaryOpExpr) and expr.kind == AffineBinaryOpKind.FloorDiv
            and isinstance(expr.rhs, AffineConstantExpr) and expr.rhs.value == step > 1):
        return None
    lhs = expr.lhs
    position = (lhs.position if isinstance(lhs, AffineDimExpr) else
                num_dims + lhs.position if isinstance(lhs, AffineSymExpr) else None)
    lower = map_forms(loop.lowerBoundMap.data, list(loop.lowerBoundOperands))
    if position is None or operands[position] is not iv or len(lower) != 1 or lower[0] is None \
            or lower[0].coeffs or lower[0].const % step:
        return None
    return LinearForm({iv: 1})


def _width(op: Operation) -> int:
    """Elements an access covers along its last subscript: a vector's lanes (a masked one's
    all of them), 1 for a scalar."""
    t = accessed_type(op)
    return t.get_shape()[0] if isinstance(t, VectorType) and t.get_num_dims() == 1 else 1


def _slice(form: LinearForm, inner: list[affine.ForOp], loop: affine.ForOp) -> _Slice | None:
    """`form` with the ivs of `inner`, the loops between `loop` and the access, replaced by
    their ranges, or None when something in it varies inside `loop` in another way."""
    lo = hi = 0
    outside = LinearForm(const=form.const)
    iv = loop.body.block.args[0]
    for v, c in form.coeffs.items():
        if v is iv or defined_outside(v, loop):
            outside = outside + LinearForm({v: c})
            continue
        owner = v.block.parent_op() if isinstance(v, BlockArgument) else None
        if not (isinstance(owner, affine.ForOp) and owner in inner and v is owner.body.block.args[0]):
            return None
        try:
            lows, highs = iv_bounds(owner, inner[: inner.index(owner) + 1])
        except FootprintError:
            return None
        extents = [d.const for h in highs if not (d := h - lows[0]).coeffs] if len(lows) == 1 else []
        if not extents or min(extents) <= 0:
            return None
        start, last = lows[0], min(extents) - 1
        if any(u is not iv and not defined_outside(u, loop) for u in start.coeffs):
            return None
        outside = outside + start * c
        lo, hi = (lo + c * last, hi) if c < 0 else (lo, hi + c * last)
    return _Slice(outside, lo, hi)


def _conflict(a: _Touch, b: _Touch, iv: SSAValue, step: int) -> str | None:
    """Why accesses `a` and `b` (one of them a write) may meet in two iterations."""
    root_a, root_b = a.root, b.root
    if root_a is not None and root_b is not None and root_a is not root_b:
        return None  # distinct buffers
    pair = f"{access_text(a.op)} and {access_text(b.op)}" if a is not b else access_text(a.op)
    if root_a is None or root_b is None:
        unknown = a.memref if root_a is None else b.memref
        return f"{pair}: {value_name(unknown)}, {unknown_origin(unknown)}, may be any buffer"
    if a.memref is not b.memref:
        return f"{pair} reach one buffer through different views"
    if a.slices is not None and b.slices is not None and any(
        _separates(x, y, iv, step)
        for x, y, nx, ny in zip(a.slices, b.slices, a.numbered, b.numbered) if nx == ny
    ):
        return None
    what = "write the same element" if a is b else "may touch the same element"
    return f"{pair} {what} in different iterations"


def _separates(x: _Slice | None, y: _Slice | None, iv: SSAValue, step: int) -> bool:
    """Whether, along one subscript, two different iterations cannot meet."""
    if x is None or y is None:
        return False
    c = x.form.coeff(iv)
    if c == 0 or y.form.coeff(iv) != c or (x.form - y.form).coeffs:
        return False
    low = min(x.form.const + x.lo, y.form.const + y.lo)
    high = max(x.form.const + x.hi, y.form.const + y.hi)
    return high - low < abs(c) * step

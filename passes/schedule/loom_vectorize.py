"""loom-vectorize{width=0 op=...}: vectorize the innermost loops of each selected nest.

Every innermost `affine.for` of a selected nest (tagged `op`, or all of them) is
strip-mined by `width`: a main loop steps by `width` over the full vectors and one masked
vector iteration does what is left, so nothing runs scalar. In the body, an access that
moves by one element of its last dimension per iteration becomes a vector load or store,
one that does not move stays scalar and is broadcast, arithmetic runs on vectors, and a
multiply feeding an add becomes `vector.fma`:

```mlir
affine.for %j = 0 to 100 {                 // inside loops over %i, %k; loom-vectorize{width=8}
  %a = affine.load %A[%i, %k] : memref<64x256xf32>
  %b = affine.load %B[%k, %j] : memref<256x100xf32>
  %c = affine.load %C[%i, %j] : memref<64x100xf32>
  %p = arith.mulf %a, %b : f32
  %s = arith.addf %c, %p : f32
  affine.store %s, %C[%i, %j] : memref<64x100xf32>
}
// becomes
%rest = arith.constant 96 : index
%zero = arith.constant dense<0.000000e+00> : vector<8xf32>
affine.for %j = 0 to 96 step 8 {
  %a = affine.load %A[%i, %k] : memref<64x256xf32>
  %b = affine.vector_load %B[%k, %j] : memref<256x100xf32>, vector<8xf32>
  %c = affine.vector_load %C[%i, %j] : memref<64x100xf32>, vector<8xf32>
  %av = vector.broadcast %a : f32 to vector<8xf32>
  %s = vector.fma %av, %b, %c : vector<8xf32>
  affine.vector_store %s, %C[%i, %j] : memref<64x100xf32>, vector<8xf32>
}
%n = arith.constant 4 : index
%mask = vector.create_mask %n : vector<8xi1>
%a2 = affine.load %A[%i, %k] : memref<64x256xf32>
%b2 = vector.maskedload %B[%k, %rest], %mask, %zero : memref<256x100xf32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
...
vector.maskedstore %C[%i, %rest], %mask, %s2 : memref<64x100xf32>, vector<8xi1>, vector<8xf32>
```

With an extent that is not constant (the point loop of a tile, `%jt to min(%jt + 32,
100)`), the split point and the remainder's size are `affine.min`s of the bounds and the
masked iteration sits under an `affine.if` that skips it when nothing is left (see
`loop_transforms.strip_mine`).

Sums. A loop that adds into one element in every iteration (conv2d's `Y[...] += ...`
along s, matmul's along k when B is read along its rows) or into an iter_arg (after
loom-hoist) is vectorized with a vector accumulator (-0.0 in every lane), added to in
the main loop and in the remainder (whose masked lanes keep the accumulator's value: a
vector.shuffle for a constant count, lane by lane otherwise), then reduced once after
the loop by `vector.reduction <add>` with `reassoc` (a tree sum: Loom allows reassociating
floating-point sums) onto the element's old value.

relu (`select(cmpf ugt %x, c), %x, c)` with a constant c other than -0.0) becomes
`arith.maximumf %x, c`, which gives the same result for every input, NaN included; the
`ult` form becomes `arith.minimumf`. Other comparisons of values that vary are refused:
xDSL's arith.cmpf and arith.select take no vectors.

Refused, with a remark and the loop left as it was (never a wrong result): a step other
than 1, a lower bound that is a max, a constant trip count below the width, ops other
than affine load/store/apply and arith/math in the body (an `affine.if`: conv2d's padding
guard), an access that moves by more than one element per iteration (`%B[%k, %j]` along
%k, a strided conv2d's input), the iv used as a number, a store to the same element in
every iteration that is not a sum, a dependence between iterations closer than the width
that the vector order would reverse, and two views of one buffer. `width=0` (the
default) takes the target's vector registers (`passes.support.target.host()`: 32 bytes with
AVX, 64 with AVX-512, or `LOOM_TARGET`'s `vector_bits`, as the cost model does) over the
largest element size; any other width must be a power of two.
"""

from __future__ import annotations

import math as pymath
from dataclasses import dataclass, field
from typing import TypeVar

from xdsl.dialects import affine, arith, math, vector
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AffineSetAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    VectorType,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineExpr, AffineMap, AffineSymExpr
from xdsl.ir.affine.affine_set import (
    AffineConstraintExpr,
    AffineConstraintKind,
    AffineSet,
)
from xdsl.traits import is_side_effect_free

from passes.support.remarks import remark
from passes.support.target import host
from dialects import arith_ext
from dialects.layout import may_alias, memref_root, unknown_origin
from passes.analysis.affine_forms import (
    AccessStride,
    StrideError,
    access_stride,
    map_forms,
)
from passes.analysis.dependences import band_dependences
from passes.schedule.loop_transforms import (
    StripMine,
    drop_unused_operands,
    promote_single_iteration,
    strip_mine,
)
from passes.analysis.loop_utils import (
    constant_trip_count,
    defined_outside,
    describe_access,
    loops_of_nest,
    move_tag,
    nest_tag,
    step_of,
    used_positions,
    value_name,
)
from passes.schedule.nest_pass import NestPass


#: ops that run lane by lane on vectors (and lower to LLVM on vectors)
ELEMENTWISE = (
    arith.AddfOp,
    arith.SubfOp,
    arith.MulfOp,
    arith.DivfOp,
    arith.NegfOp,
    arith.MaximumfOp,
    arith.MinimumfOp,
    arith.MaxnumfOp,
    arith.MinnumfOp,
    math.FmaOp,
    math.AbsFOp,
    math.SqrtOp,
    math.RoundEvenOp,
    # low precision: bf16 widened and rounded, int8 widened, i32 arithmetic, the
    # quantization's casts (arith_ext's: xDSL 0.74's arith casts take scalars only)
    arith.ExtFOp,
    arith.TruncFOp,
    arith.AddiOp,
    arith.SubiOp,
    arith.MuliOp,
    arith.MaxSIOp,
    *arith_ext.CASTS,
)

#: select(cmpf P, %x, c), %x, c) -> the op, when c is a constant other than the zero named
_EXTREMA: dict[str, tuple[type[Operation], float]] = {
    "ugt": (arith.MaximumfOp, -0.0),
    "uge": (arith.MaximumfOp, 0.0),
    "ult": (arith.MinimumfOp, 0.0),
    "ule": (arith.MinimumfOp, -0.0),
}


_OpT = TypeVar("_OpT", bound=Operation)


class _Refusal(Exception):
    """Why a loop is not vectorized (the remark's text)."""


@dataclass
class _Sum:
    """A sum carried across the loop's iterations: in one memref element (loaded and
    stored in every iteration) or in an iter_arg. `start` is the partial sum as the body
    receives it (the load's result, the iter_arg), `end` what the body passes on."""

    start: SSAValue
    end: SSAValue
    load: affine.LoadOp | None = None
    store: affine.StoreOp | None = None
    iter_arg: int | None = None


@dataclass
class _Plan:
    """What the analysis found: how each op of the body is vectorized."""

    width: int
    body: list[Operation]
    strides: dict[Operation, AccessStride]
    #: values that are vectors after vectorization (the others stay scalar)
    varying: set[SSAValue] = field(default_factory=set)
    sums: list[_Sum] = field(default_factory=list)
    #: addf -> (a, b, c) of the vector.fma it becomes
    fma: dict[Operation, tuple[SSAValue, SSAValue, SSAValue]] = field(default_factory=dict)
    #: select -> (maximumf or minimumf, x, c)
    extrema: dict[Operation, tuple[type[Operation], SSAValue, SSAValue]] = field(default_factory=dict)
    #: ops that leave no op of their own (a mulf folded into an fma, a cmpf into a max)
    dropped: set[Operation] = field(default_factory=set)

    def is_vector_access(self, op: Operation) -> bool:
        return op in self.strides and self.strides[op].contiguous


#: per innermost loop of a nest: the loop, the remark's words, and its plan (None: the
#: words say why it is not vectorized)
_Vectorizing = list[tuple[affine.ForOp, str, _Plan | None]]


@dataclass(frozen=True)
class LoomVectorizePass(NestPass[_Vectorizing]):
    name = "loom-vectorize"

    width: int = 0
    op: str | None = None

    def option_problems(self) -> list[str | None]:
        if self.width < 0 or self.width & (self.width - 1):
            return [f"option 'width' must be a power of two (or 0: the target's), got {self.width}"]
        return []

    def plan(self, nest: affine.ForOp, misfit: str | None) -> _Vectorizing:
        """Each innermost loop of the nest, with its plan or why it is not vectorized."""
        innermost = [
            loop for loop in loops_of_nest(nest)
            if not any(isinstance(inner, affine.ForOp) for inner in loop.body.walk())
        ]
        tag = nest_tag(nest) or "untagged"
        plans: _Vectorizing = []
        for loop in innermost:
            iv = loop.body.block.args[0]
            what = f"loop {value_name(iv)}" if iv.name_hint else "its innermost loop"
            try:
                plans.append((loop, f"nest '{tag}': vectorized {what}", _analyze(loop, self.width)))
            except _Refusal as why:
                plans.append((loop, f"nest '{tag}': {what} not vectorized: {why}", None))
        return plans

    def rewrite(self, nest: affine.ForOp, plans: _Vectorizing) -> None:
        for loop, words, plan in plans:
            if plan is None:
                remark(self.name, loop, words, missed=True)
            else:
                summary = _Vectorizer(loop, plan).run()
                remark(self.name, loop, f"{words} {summary}")


# --------------------------------------------------------------------------------------
# Analysis
# --------------------------------------------------------------------------------------


def _analyze(loop: affine.ForOp, width: int) -> _Plan:
    """The plan for vectorizing `loop` by `width` (0: the target's), or _Refusal."""
    iv = loop.body.block.args[0]
    if step_of(loop) != 1:
        raise _Refusal(f"its step is {step_of(loop)}, not 1")
    if len(loop.lowerBoundMap.data.results) != 1:
        raise _Refusal("its lower bound is a max")
    trips = constant_trip_count(loop)
    body = [op for op in loop.body.block.ops if not isinstance(op, affine.YieldOp)]
    for op in body:
        if isinstance(op, affine.IfOp):
            raise _Refusal("its body has an affine.if (a guard)")
        if not (isinstance(op, affine.LoadOp | affine.StoreOp | affine.ApplyOp)
                or op.name.startswith(("arith.", "arith_ext.", "math."))):
            raise _Refusal(f"its body has '{op.name}'")
        if any(isinstance(t, VectorType) for t in (*op.operand_types, *op.result_types)):
            raise _Refusal(f"its body already works on vectors ('{op.name}')")
    _check_index_uses(loop, body)
    try:
        strides = {op: access_stride(op, loop) for op in body if isinstance(op, affine.LoadOp | affine.StoreOp)}
    except StrideError as e:
        raise _Refusal(str(e)) from None
    for op, s in strides.items():
        if not (s.invariant or s.contiguous):
            step = f"stride {s.stride}" if s.stride is not None else f"coefficients {list(s.coefficients)}"
            why = f"{describe_access(op)} has {step} in {value_name(iv)}"
            if s.stride == 1:  # adjacent elements, but along a dimension a vector load does not read
                why += ", along a dimension other than the last (a vector load reads along the last)"
            raise _Refusal(why)
    plan = _Plan(_width(loop, width, strides), body, strides)
    if trips is not None and trips < plan.width and (trips < 1 or nest_tag(loop) is not None):
        # (a nest's own loop keeps its tag: a loop is needed; an inner one becomes one
        # masked vector)
        raise _Refusal(f"it has {trips} iteration{'s' if trips != 1 else ''}, fewer than the width {plan.width}")
    plan.sums = _sums(loop, plan)
    _classify(loop, plan)
    _check_views(plan)  # (the more precise reason: the dependence analysis gives views `*`)
    _check_dependences(loop, plan)
    return plan


def _check_index_uses(loop: affine.ForOp, body: list[Operation]) -> None:
    """The iv (and affine.apply results computed from it) may only index memory."""
    iv = loop.body.block.args[0]
    derived = {iv}
    for op in body:
        if isinstance(op, affine.ApplyOp) and any(v in derived for v in op.operands):
            derived.add(op.result)
    for value in derived:
        for use in value.uses:
            user = use.operation
            is_index = (
                isinstance(user, affine.ApplyOp)
                or (isinstance(user, affine.LoadOp) and use.index >= 1)
                or (isinstance(user, affine.StoreOp) and use.index >= 2)
            )
            if not is_index:
                raise _Refusal(f"{value_name(iv)} is used as a value by '{user.name}'")


def _width(loop: affine.ForOp, width: int, strides: dict[Operation, AccessStride]) -> int:
    """`width`, or (0) as many of the widest element as the target's vector holds: the
    target, not the CPU, so that `LOOM_TARGET` decides every width alike."""
    if width:
        return width
    types = [op.memref.type.get_element_type() for op in strides]  # type: ignore[union-attr]
    types += [arg.type for arg in loop.body.block.args[1:]]
    sizes = [_byte_size(t) for t in types]
    return max(1, host().vector_bits // 8 // max(sizes, default=4))


def _byte_size(t: Attribute) -> int:
    bitwidth = getattr(t, "bitwidth", None)
    return max(1, bitwidth // 8) if isinstance(bitwidth, int) else 8  # index: 8 bytes


def _sums(loop: affine.ForOp, plan: _Plan) -> list[_Sum]:
    """Every store to the same element in each iteration, and every iter_arg, must be a
    sum: the partial sum flows from its start to its end through single-use addf ops."""
    iv = value_name(loop.body.block.args[0])
    sums = []
    for st in plan.body:
        if not (isinstance(st, affine.StoreOp) and plan.strides[st].invariant):
            continue
        ld = next((op for op in plan.body if _same_element(op, st)), None)
        if ld is None or not _is_sum(ld.result, st.value, plan.body):
            raise _Refusal(f"{describe_access(st)} is stored to the same element in every iteration of {iv}, not as a sum")
        if not all(defined_outside(v, loop) for v in _used_indices(ld)):
            raise _Refusal(f"the address of the sum {describe_access(st)} is computed in the loop")
        sums.append(_Sum(ld.result, st.value, load=ld, store=st))
    block = loop.body.block
    yielded = block.last_op.operands if isinstance(block.last_op, affine.YieldOp) else ()
    for i, (arg, end) in enumerate(zip(block.args[1:], yielded)):
        if not _is_sum(arg, end, plan.body):
            raise _Refusal(f"iter_arg #{i} of {iv} is not a sum")
        sums.append(_Sum(arg, end, iter_arg=i))
    return sums


def _used_indices(access: affine.LoadOp) -> list[SSAValue]:
    """The index operands the access's map reads (not the ivs convert-loom-to-affine
    passes to every access)."""
    m = access.map.data
    used = used_positions(m.results, m.num_dims)
    return [v for p, v in enumerate(access.indices) if p in used]


def _address_after(access: affine.LoadOp) -> affine.LoadOp:
    """A load of the element `access` reads, taking only the operands its map uses (not
    the ivs convert-loom-to-affine passes to every access), for use after the loop."""
    load = affine.LoadOp(access.memref, list(access.indices), access.map, access.result.type)
    drop_unused_operands(load)
    load.location = access.location
    return load


def _same_element(op: Operation, st: affine.StoreOp) -> bool:
    """`op` is a load, before `st`, of the element `st` stores to."""
    if not (isinstance(op, affine.LoadOp) and op.memref is st.memref and op.is_before_in_block(st)):
        return False
    loaded, stored = map_forms(op.map.data, op.indices), map_forms(st.map.data, st.indices)
    return None not in loaded and loaded == stored


def _is_sum(start: SSAValue, end: SSAValue, body: list[Operation]) -> bool:
    """`end` is `start` plus other terms through a chain of single-use addf in `body`."""
    value = start
    while value is not end:
        if not value.has_one_use():
            return False
        user = value.get_user_of_unique_use()
        if not isinstance(user, arith.AddfOp) or user not in body:
            return False
        value = user.result
    return value is not start and value.has_one_use()


def _classify(loop: affine.ForOp, plan: _Plan) -> None:
    """Which values are vectors, and what each varying op becomes."""
    iv = value_name(loop.body.block.args[0])
    plan.varying.update(s.start for s in plan.sums)
    comparisons: list[Operation] = []
    for op in plan.body:
        if isinstance(op, affine.LoadOp):
            if plan.is_vector_access(op):
                plan.varying.add(op.result)
            continue
        if isinstance(op, affine.StoreOp | affine.ApplyOp):
            continue
        if not any(v in plan.varying for v in op.operands):
            continue
        plan.varying.update(op.results)
        if isinstance(op, arith.CmpfOp):
            comparisons.append(op)
        elif isinstance(op, arith.SelectOp):
            _plan_select(op, plan, iv)
        elif isinstance(op, arith.AddfOp):
            _plan_fma(op, plan)
        elif not isinstance(op, ELEMENTWISE):
            raise _Refusal(f"'{op.name}' on values that vary with {iv} has no vector form here")
    for cmp in comparisons:
        if cmp not in plan.dropped:
            raise _Refusal(
                f"a comparison of values that vary with {iv} ('arith.cmpf'): xDSL's arith.cmpf "
                "and arith.select take no vectors"
            )
    if not plan.sums and not any(plan.is_vector_access(op) for op in plan.body):
        raise _Refusal(f"nothing in its body varies with {iv}")


def extremum(select: arith.SelectOp) -> tuple[type[Operation], arith.CmpfOp] | None:
    """For `select(cmpf P %x, c), %x, c)` with a constant c (relu's: P ugt, c 0), the op
    it is on vectors, a max or a min (the same result, NaN included), and its comparison,
    which goes with the select; None for any other select."""
    cmp = select.cond.owner
    if isinstance(cmp, arith.CmpfOp) and cmp.result.has_one_use() and cmp.lhs is select.lhs and cmp.rhs is select.rhs:
        predicate = arith.CMPF_COMPARISON_OPERATIONS[cmp.predicate.value.data]
        const = select.rhs.owner
        if predicate in _EXTREMA and isinstance(const, arith.ConstantOp) and isinstance(const.value, FloatAttr):
            target, excluded = _EXTREMA[predicate]
            c = const.value.value.data
            if not pymath.isnan(c) and not (c == 0.0 and pymath.copysign(1.0, c) == pymath.copysign(1.0, excluded)):
                return target, cmp
    return None


def _plan_select(op: arith.SelectOp, plan: _Plan, iv: str) -> None:
    if op.cond not in plan.varying:
        return  # a scalar condition choosing between vectors
    found = extremum(op)
    if found is None:
        raise _Refusal(f"an arith.select on a condition that varies with {iv}: xDSL's arith.select takes no vector "
                       "condition")
    target, cmp = found
    plan.extrema[op] = (target, op.lhs, op.rhs)
    plan.dropped.add(cmp)


def _plan_fma(op: arith.AddfOp, plan: _Plan) -> None:
    """addf(c, mulf(a, b)) -> fma(a, b, c) when the product has no other use."""
    for product, other in ((op.rhs, op.lhs), (op.lhs, op.rhs)):
        mul = product.owner
        if isinstance(mul, arith.MulfOp) and mul in plan.body and product.has_one_use():
            plan.fma[op] = (mul.lhs, mul.rhs, other)
            plan.dropped.add(mul)
            return


def _check_dependences(loop: affine.ForOp, plan: _Plan) -> None:
    """In the vector loop, each statement runs for `width` iterations before the next
    one: a dependence carried by the loop survives when the statements stay in order
    (source before sink in the body) or its distance is at least the width. The loads
    and stores of a sum depend on each other at every distance; the accumulator handles
    those."""
    position = {op: i for i, op in enumerate(plan.body)}
    sums = [{s.load, s.store} for s in plan.sums if s.load is not None]
    for dep in band_dependences([loop]):
        if dep.directions == ("=",) or any({dep.source, dep.sink} <= pair for pair in sums):
            continue
        distance = dep.distance[0] if dep.distance else None
        in_order = dep.source is not dep.sink and position[dep.source] < position[dep.sink]
        if distance is not None and distance > 0 and (in_order or distance >= plan.width):
            continue
        at = f" at distance {distance}" if distance is not None else ""
        raise _Refusal(f"dependence {dep.describe()}{at} (vector width {plan.width})")


def _check_views(plan: _Plan) -> None:
    """Distinct memrefs are distinct buffers unless they view one (or one is of unknown
    origin, and may be any buffer): then refuse."""
    written = {op.memref for op in plan.body if isinstance(op, affine.StoreOp)}
    memrefs = list(dict.fromkeys(op.memref for op in plan.strides))  # type: ignore[union-attr]
    for i, a in enumerate(memrefs):
        for b in memrefs[i + 1 :]:
            if may_alias(a, b) and (a in written or b in written):
                unknown = next((v for v in (a, b) if memref_root(v) is None), None)
                if unknown is None:
                    raise _Refusal(f"{value_name(a)} and {value_name(b)} are views of one buffer")
                raise _Refusal(f"{value_name(a)} and {value_name(b)} may be one buffer: {value_name(unknown)} is "
                               f"{unknown_origin(unknown)}")


# --------------------------------------------------------------------------------------
# Rewriting
# --------------------------------------------------------------------------------------


class _Vectorizer:
    """Builds the main loop and the masked remainder in place of `loop`."""

    def __init__(self, loop: affine.ForOp, plan: _Plan):
        self.loop = loop
        self.plan = plan
        self.iv = loop.body.block.args[0]
        self.before: list[Operation] = []  # broadcasts and constants, ahead of the main loop
        self.splats: dict[tuple[str, Attribute], SSAValue] = {}
        self.broadcasts: dict[SSAValue, SSAValue] = {}

    def vector_type(self, t: Attribute) -> VectorType:
        return VectorType(t, [self.plan.width])

    def run(self) -> str:
        """Replace the loop; returns what was done, for the remark."""
        loop, plan = self.loop, self.plan
        split = strip_mine(loop, plan.width)
        parent = loop.parent_block()
        assert parent is not None
        accs = [self.hoist_splat(-0.0, s.start.type) for s in plan.sums]
        # no full vector (fewer iterations than the width, an inner loop): one masked one
        main = self.main_loop(split, accs) if split.upper is not None else None
        accs = list(main.results) if main is not None else accs
        rest_ops: list[Operation] = []
        if split.rest is not None:
            rest_ops, accs = self.remainder(split, accs)
        finals = self.finish(accs)
        for op in [*self.before, *([main] if main is not None else []), *rest_ops, *finals]:
            parent.insert_op_before(op, loop)
        if main is None:
            parent.erase_op(loop)
            return self.summary(split)
        main.attributes.update(loop.attributes)
        move_tag(loop, main)
        parent.erase_op(loop)
        text = self.summary(split)
        if split.chunks == 1 and nest_tag(main) is None:
            # one full vector: its ops in place of the loop (as loom-unroll would), so
            # that the loop around it is innermost and can be jammed
            promote_single_iteration(main)
            text += "; the main loop's single iteration inlined"
        return text

    def summary(self, split: StripMine) -> str:
        w = self.plan.width
        if split.chunks is None:
            text = f"by {w} (a main loop and a masked remainder: the trip count is not constant)"
        elif split.chunks == 0:
            text = f"by {w} (one masked vector of {split.rest_count}: fewer iterations than the width)"
        else:
            main = f"main {split.chunks} iteration{'s' if split.chunks > 1 else ''}"
            rest = f"masked remainder of {split.rest_count}" if split.rest_count else "no remainder"
            text = f"by {w} ({main}, {rest})"
        for s in self.plan.sums:
            into = describe_access(s.store) if s.store is not None else f"iter_arg #{s.iter_arg}"
            text += f"; sum into {into} in a vector accumulator, reduced after the loop"
        return text

    # -- pieces --------------------------------------------------------------------------

    def main_loop(self, split: StripMine, accs: list[SSAValue]) -> affine.ForOp:
        """The loop over the full vectors, carrying the sums' accumulators."""
        assert split.upper is not None
        block = Block(arg_types=[IndexType(), *(a.type for a in accs)])
        block.args[0].name_hint = self.iv.name_hint
        ops, outs = self.body(block.args[0], None, list(block.args[1:]))
        yield_op = affine.YieldOp.get(*outs)
        yield_op.location = self.loop.location
        block.add_ops([*ops, yield_op])
        (lb_map, lb_ops), (ub_map, ub_ops) = split.lower, split.upper
        main = affine.ForOp.from_region(
            lb_ops, ub_ops, accs, [a.type for a in accs], AffineMapAttr(lb_map), AffineMapAttr(ub_map),
            Region(block), self.plan.width,
        )
        main.location = self.loop.location
        return main

    def remainder(self, split: StripMine, accs: list[SSAValue]) -> tuple[list[Operation], list[SSAValue]]:
        """The masked iteration at `split.rest`: straight-line for a constant count, under
        `affine.if count >= 1` otherwise."""
        assert split.rest is not None and split.rest_count is not None
        if isinstance(split.rest_count, int):
            count = self.located(arith.ConstantOp(IntegerAttr.from_index_int_value(split.rest_count)))
            mask = self.located(vector.CreateMaskOp([count], self.vector_type(i1)))
            ops, outs = self.body(split.rest, mask.mask_vector, accs, split.rest_count)
            return [count, mask, *ops], outs
        mask = self.located(vector.CreateMaskOp([split.rest_count], self.vector_type(i1)))
        ops, outs = self.body(split.rest, mask.mask_vector, accs, split.rest_count)
        then_yield = self.located(affine.YieldOp.get(*outs))
        else_region = Region(Block([self.located(affine.YieldOp.get(*accs))])) if accs else Region()
        d0 = AffineExpr.dimension(0)
        nonempty = AffineSet(1, 0, (AffineConstraintExpr(AffineConstraintKind.ge, d0, AffineExpr.constant(1)),))
        guard = self.located(affine.IfOp.create(
            operands=[split.rest_count],
            properties={"condition": AffineSetAttr(nonempty)},
            regions=[Region(Block([mask, *ops, then_yield])), else_region],
            result_types=[a.type for a in accs],
        ))
        return [guard], list(guard.results)

    def finish(self, accs: list[SSAValue]) -> list[Operation]:
        """Reduce each accumulator onto the sum's old value, after the loop."""
        ops: list[Operation] = []
        for s, acc in zip(self.plan.sums, accs):
            if s.load is not None and s.store is not None:
                old = _address_after(s.load)
                total = self.reduction(acc, old.result, s.store)
                store = affine.StoreOp(total.results[0], old.memref, list(old.indices), old.map)
                store.location = s.store.location
                ops += [old, total, store]
            else:
                assert s.iter_arg is not None
                total = self.reduction(acc, self.loop.inits[s.iter_arg], self.loop)
                ops.append(total)
                self.loop.results[s.iter_arg].replace_all_uses_with(total.results[0])
        return ops

    def reduction(self, acc: SSAValue, start: SSAValue, at: Operation) -> Operation:
        total = vector.ReductionOp.create(
            operands=[acc, start],
            result_types=[start.type],
            properties={
                "kind": vector.CombiningKindAttr(vector.CombiningKindFlag.ADD),
                "fastmath": arith.FastMathFlagsAttr((arith.FastMathFlag.REASSOC,)),
            },
        )
        total.location = at.location
        return total

    def body(
        self, iv: SSAValue, mask: SSAValue | None, accs: list[SSAValue], count: int | SSAValue | None = None
    ) -> tuple[list[Operation], list[SSAValue]]:
        """The loop body on vectors starting at iteration `iv` (masked by `mask` in the
        remainder, whose `count` lanes are live), and the sums' new accumulators."""
        plan = self.plan
        mapping: dict[SSAValue, SSAValue] = {self.iv: iv}
        mapping.update((s.start, acc) for s, acc in zip(plan.sums, accs))
        ops: list[Operation] = []
        copies: list[Operation] = []  # scalar ops, as they were
        local: dict[SSAValue, SSAValue] = {}

        def emit(new: Operation, old: Operation) -> Operation:
            new.location = old.location
            ops.append(new)
            return new

        def vec(v: SSAValue) -> SSAValue:
            """`v` as a vector: its vector form, or a broadcast of its scalar."""
            if v in plan.varying:
                return mapping[v]
            if isinstance(v.owner, arith.ConstantOp) and isinstance(v.owner.value, FloatAttr):
                return self.hoist_splat(v.owner.value.value.data, v.type)
            if defined_outside(v, self.loop):
                return self.hoist_broadcast(v)
            if v not in local:
                local[v] = emit(vector.BroadcastOp(mapping.get(v, v), self.vector_type(v.type)), v.owner).results[0]  # type: ignore[arg-type]
            return local[v]

        sum_ops = {op for s in plan.sums for op in (s.load, s.store) if op is not None}
        for op in plan.body:
            if op in plan.dropped or op in sum_ops:
                continue
            operands = [mapping.get(v, v) for v in op.operands]
            if isinstance(op, affine.LoadOp) and plan.is_vector_access(op):
                vtype = self.vector_type(op.result.type)
                if mask is None:
                    new = affine.VectorLoadOp(op.memref, operands[1:], op.map, vtype)
                else:
                    zero = self.hoist_splat(0.0, op.result.type)
                    new = vector.MaskedLoadOp(op.memref, self.subscripts(op, operands[1:], ops), mask, zero)
            elif isinstance(op, affine.StoreOp) and plan.is_vector_access(op):
                value = vec(op.value)
                if mask is None:
                    new = affine.VectorStoreOp(value, op.memref, operands[2:], op.map)
                else:
                    new = vector.MaskedStoreOp(op.memref, self.subscripts(op, operands[2:], ops), mask, value)
            elif op in plan.fma:
                a, b, c = plan.fma[op]
                new = vector.FMAOp(vec(a), vec(b), vec(c))
            elif op in plan.extrema:
                target, x, c = plan.extrema[op]
                new = target.create(operands=[vec(x), vec(c)], result_types=[self.vector_type(x.type)])
            elif any(r in plan.varying for r in op.results):
                vectors = [vec(v) for v in op.operands]
                if isinstance(op, arith.SelectOp):  # a scalar condition stays scalar
                    vectors[0] = operands[0]
                new = type(op).create(
                    operands=vectors,
                    result_types=[self.vector_type(r.type) for r in op.results],
                    properties=dict(op.properties),
                    attributes=dict(op.attributes),
                )
            else:
                new = op.clone(value_mapper=mapping)
                copies.append(new)
            emit(new, op)
            for old, result in zip(op.results, new.results):
                result.name_hint = result.name_hint or old.name_hint
                mapping[old] = result
        for dead in reversed(copies):  # scalars only the scalar loop used (relu's 0.0, now a splat)
            if is_side_effect_free(dead) and not any(r.uses for r in dead.results):
                ops.remove(dead)
                dead.drop_all_references()
        outs = [mapping[s.end] for s in plan.sums]
        if mask is not None:
            assert count is not None
            outs = [self.blend(new, old, count, ops) for new, old in zip(outs, accs)]
        return ops, outs

    def blend(self, new: SSAValue, old: SSAValue, count: int | SSAValue, ops: list[Operation]) -> SSAValue:
        """The first `count` lanes of `new`, the others of `old` (a select on the mask,
        which xDSL's arith.select cannot do on vectors): one vector.shuffle for a
        constant count, lane by lane otherwise."""
        w = self.plan.width
        if isinstance(count, int):
            lanes = [*range(count), *range(w + count, 2 * w)]
            shuffle = vector.ShuffleOp(new, old, DenseArrayBase.from_list(i64, lanes), result_type=new.type)  # type: ignore[arg-type]
            ops.append(self.located(shuffle))
            return shuffle.results[0]
        result = old
        element = new.type.element_type  # type: ignore[union-attr]
        for lane in range(w):
            index = arith.ConstantOp(IntegerAttr.from_index_int_value(lane))
            live = arith.CmpiOp(index, count, "slt")
            fresh = vector.ExtractOp(new, [lane], element)
            kept = vector.ExtractOp(old, [lane], element)
            chosen = arith.SelectOp(live, fresh, kept)
            inserted = vector.InsertOp(chosen.result, result, [lane])
            ops += [self.located(o) for o in (index, live, fresh, kept, chosen, inserted)]
            result = inserted.result
        return result

    def subscripts(self, op: affine.LoadOp | affine.StoreOp, operands: list[SSAValue], ops: list[Operation]) -> list[SSAValue]:
        """The indices of an access as values (for vector.maskedload/maskedstore)."""
        m = op.map.data
        values = []
        for expr in m.results:
            if isinstance(expr, AffineDimExpr):
                values.append(operands[expr.position])
            elif isinstance(expr, AffineSymExpr):
                values.append(operands[m.num_dims + expr.position])
            else:
                apply = affine.ApplyOp(operands, AffineMapAttr(AffineMap(m.num_dims, m.num_symbols, (expr,))))
                apply.location = op.location
                ops.append(apply)
                values.append(apply.result)
        return values

    def hoist_splat(self, value: float, element: Attribute) -> SSAValue:
        """A constant vector, made once ahead of the loop."""
        key = (repr(value), element)  # -0.0 and 0.0 apart
        if key not in self.splats:
            lane = int(value) if isinstance(element, IntegerType) else value
            const = arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(self.vector_type(element), [lane] * self.plan.width))
            self.before.append(self.located(const))
            self.splats[key] = const.result
        return self.splats[key]

    def hoist_broadcast(self, v: SSAValue) -> SSAValue:
        """The broadcast of a value defined above the loop, made once ahead of it."""
        if v not in self.broadcasts:
            broadcast = vector.BroadcastOp(v, self.vector_type(v.type))
            self.before.append(self.located(broadcast))
            self.broadcasts[v] = broadcast.vector
        return self.broadcasts[v]

    def located(self, op: _OpT) -> _OpT:
        """`op`, at the loop's location."""
        op.location = self.loop.location
        return op

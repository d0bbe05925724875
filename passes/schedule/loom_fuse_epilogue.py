"""loom-fuse-epilogue: the elementwise ops after a matmul or conv2d (add, mul, relu, clamp) computed
inside its nest, on each element where the nest writes it for the last time.

`relu(x @ w + b)` lowers to a zero fill of C, a matmul nest that accumulates into C, an
`add` nest that reads C and writes S, and a `relu` nest that reads S and writes R: C and
S are written and read back, the whole matrix each. This pass removes the `add` and
`relu` nests and the zero fill: the matmul nest accumulates into R instead of C; where it
stores an element for the last time (its register block, after the last k panel) it
stores `relu(c + b[j])` instead of `c`, and where it reads an element for the first time
(before the first k panel) it takes a zero instead. C and S are no longer allocated, and
R is written once per k panel: once when K fits a panel.

It works on the affine nests, after the matmul is scheduled (loom-default runs it as its
step `fuse`, before the epilogue nests are vectorized and before the parallel step), so
that the schedule passes see the textbook matmul nest: whatever they made of it, this
pass finds the stores and loads of C and tells, for each, when it is the element's last
write (first read):

- an access's loops are *spatial* (their ivs, or the bounds of such loops, give the
  element it touches: i_t, i_r, j_t, j_r, ...) or *reductions* (k_t, k: every iteration
  touches the same element again). A store is the last write of its element when every
  reduction loop around it is in its last iteration (the guard: `%k_t >= 2304`, computed
  once per block; none when K fits one panel), unless a later store rewrites what it
  wrote (the first 7 of 8 stores of a k loop unroll-jammed by 8, the k remainder's nest
  after the main one): then it is never the last. A load is the first read in the first
  iterations, unless an earlier store of the producer wrote its elements;
- that is exact only if different iterations of a spatial loop touch different elements
  (what its body writes in one iteration, a box, spans at most its step), the loops
  inside a reduction loop run in each of its iterations, no access sits under a guard
  (`affine.if`), every store after (before) the access writes elements apart from its
  own or all of them (or the stores after it that write some write all of them together:
  a register tile's, after loom-compensate's subtraction over the tile), every load of C is followed by a store of the same elements (C
  is read only to accumulate), and the last writes write every element of C (their
  counts add up to its size: an element only the zero fill writes would take no
  epilogue). A store that fails this is refused (the nests left as they were); a load
  that fails it keeps the zero fill (into R).

The guarded store becomes `select(guard, epilogue(c), c)` (no select without a guard),
the epilogue on the register block's vectors: operands read at unit stride along the
vector as vectors (masked where the store is), operands constant along it (a bias over
the rows of an NCHW image, a column vector) as a broadcast scalar; relu as `maximumf`
(what loom-vectorize makes of it). The guarded load becomes `select(first, 0, c)` (no
load at all when it is always the first). A conv2d's matmul stores through a row-major
view of Y (F x Ho*Wo, or N*Ho*Wo x F): each operand is then read through a view of the
same shape, its broadcast dimensions with stride 0 (a bias of shape F x 1 x 1 is
`strided<[1, 0]>` over F x Ho*Wo). The direct convolution's copy of its result into Y
(`direct.out`) takes the epilogue the same way (its stores are each the only write of
their element).

```mlir
affine.for ... { affine.store %zero, %c[...] } {loom.tag = "matmul.init"}
affine.for %j_t ... affine.for %k_t = 0 to 3072 step 768 ... {
  %c0 = affine.vector_load %c[%i_r, %j_r] : memref<128x768xf32>, vector<16xf32>
  %acc = affine.for %k ... iter_args(%a = %c0) ...
  affine.vector_store %acc, %c[%i_r, %j_r] : memref<128x768xf32>, vector<16xf32>
} {loom.tag = "matmul"}
affine.for %i ... affine.for %j ... { %s[%i, %j] = %c[%i, %j] + %b[%j] } {loom.tag = "add"}
affine.for %i ... affine.for %j ... { %r[%i, %j] = relu(%s[%i, %j]) } {loom.tag = "relu"}
// becomes
affine.for %j_t ... affine.for %k_t = 0 to 3072 step 768 ... {
  %l = affine.vector_load %r[%i_r, %j_r] : memref<128x768xf32>, vector<16xf32>
  %first = arith.cmpi eq, %k_t, %c0_index : index
  %c0 = arith.select %first, %zeros, %l : vector<16xf32>
  %acc = affine.for %k ... iter_args(%a = %c0) ...
  %last = arith.cmpi sge, %k_t, %c2304 : index
  %bj = affine.vector_load %b[%j_r] : memref<768xf32>, vector<16xf32>
  %s = arith.addf %acc, %bj : vector<16xf32>
  %m = arith.maximumf %s, %zeros : vector<16xf32>
  %v = arith.select %last, %m, %acc : vector<16xf32>
  affine.vector_store %v, %r[%i_r, %j_r] : memref<128x768xf32>, vector<16xf32>
} {loom.tag = "matmul"}
```

A producer that no epilogue follows (or whose epilogue is refused) loses its zero fill
all the same, under the same analysis: its first reads read a zero, and C is written
once (a plain 64^3 matmul on znver4 ran 1-2% faster for it, 128^3 2%). The fill stays,
with a remark, where a load cannot be told to be the first (or K = 0: the fill is C).

What is fused: the chain of textbook elementwise nests (`add`, `mul`, `relu`, `clamp`,
`dequantize`, `quantize`, `cast`, at most MAX_STEPS of them) that reads the producer's
result, and then each one's result, at the element it writes. First, a `cast` nest that
only widens a buffer (bf16 -> f32) into a temporary that one such nest reads at its
element (a bf16 model's residual) is folded into that reader, which widens each element
as it reads it: the temporary, written after the producer, would stop the chain.

An epilogue may change the element type: a quantized layer's i32 sums + bias, dequantized
to f32, relu'd and requantized to ui8 (`x @ w` on u8 x s8, or a conv2d, then the next
layer's input) is one nest. The ui8 result cannot hold the partial sums: an unguarded last
write stores the epilogue's value into the result instead of C; a guarded one keeps C's
store and computes the epilogue and the result's store inside `scf.if %last` (no select
between two types; computed at every k step of a nest that streams rows, it cost 5% on
1x1 C256 14^2). C stays where the nest reads partial sums back (K over several panels, the
rows streamed k by k), else it goes, and the remark says which (`%acc still holds the
partial sums, ...`). The steps' casts and constants run on vectors of their own element
types (i32 sums, f32 scales, ui8 results), 0-d operands (a per-tensor scale) as broadcast
scalars. Quantized ResNet layers (u8 x s8, requantized to u8: `loom-bench --conv --dtype
int8 --requantize`), znver3, one thread, the fused and the unfused kernel interleaved in
one process: the stem 1.09x, the others 0.98-1.02x (their separate nests over Y were cheap:
Y stays in the caches); the two intermediate buffers are gone.

Refused with a remark (the nests left as they were): an epilogue that
reads C at another index (a transpose, a broadcast of C), an intermediate that is also a
result of the function or read elsewhere (it must still be written), an operand written
after the producer, an operand read at a stride other than 0 or 1 along the vector, a
producer whose stores do not pass the checks above (the textbook conv2d nest's stores
sit under its padding guard), and a nest already vectorized. The chain stops, with the
reason in the remark, at the first nest that would be refused.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import affine, arith, func, memref, scf, vector
from xdsl.dialects.builtin import (
    AffineMapAttr,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    VectorType,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.passes import ModulePass

from passes.support.remarks import remark
from dialects.layout import (
    BUFFER_OPS,
    VIEW_OPS,
    contiguous,
    memref_root,
    reshape_strides,
    row_major_strides,
    static_strides,
    strided_view,
)
from dialects.loom import PrefetchOp
from passes.analysis.affine_forms import LinearForm, affine_exprs, map_forms
from passes.analysis.last_write import INITS, Access, LastWriteAnalysis, Refused, may_write
from passes.analysis.loop_utils import (
    AFFINE_STORES,
    LOADS,
    STORES,
    access_memref,
    constant_bounds,
    defined_outside,
    describe_access,
    iv_name,
    line_suffix,
    nest_tag,
    perfect_band,
    select_nests,
    step_of,
    value_name,
)
from passes.schedule.loom_grouped_conv import TAG as GROUPED_CONV
from passes.schedule.loom_vectorize import ELEMENTWISE, extremum  # the ops loom-vectorize runs on vectors

#: the nests an epilogue is fused into: a matmul's (a conv2d's, once loom-direct-conv or
#: loom-im2col made it one), the direct convolution's copy of its result into Y, a grouped
#: convolution's (loom-grouped-conv's), and the textbook conv2d nest (refused: its stores
#: sit under the padding guard)
PRODUCERS = ("matmul", "direct.out", GROUPED_CONV, "conv2d", "winograd_output")
#: the elementwise nests an epilogue is made of (the quantization's and the casts change the
#: element type: an i32 accumulator's layer requantized to ui8)
EPILOGUES = ("add", "mul", "relu", "clamp", "dequantize", "quantize", "cast")
#: the most elementwise nests one epilogue takes: each adds its ops to every store of
#: the register block (a longer chain keeps its other nests)
MAX_STEPS = 8


def _what(nest: Operation) -> str:
    return f"{nest_tag(nest) or 'untagged'}{line_suffix(nest)}"


def _nest_text(nest: Operation) -> str:
    return f"the '{nest_tag(nest) or 'untagged'}' nest{line_suffix(nest)}"


# --------------------------------------------------------------------------------------
# The elementwise nests
# --------------------------------------------------------------------------------------


@dataclass
class _Step:
    """One elementwise nest of the epilogue: the textbook perfect nest over its result
    (convert-loom-to-affine's), whose body reads the value so far (`source`) at the
    element it writes, reads operands, computes and stores once."""

    nest: affine.ForOp
    ivs: list[SSAValue]
    ops: list[Operation]  # the body less its store and yield
    source: SSAValue
    store: affine.StoreOp
    operands: list[affine.LoadOp] = field(default_factory=list)
    #: relu's select -> the max it is on vectors and its comparison (both become the max)
    extrema: dict[Operation, tuple[type[Operation], Operation]] = field(default_factory=dict)

    @property
    def out(self) -> SSAValue:
        return self.store.memref


def _identity(forms: Sequence[LinearForm | None], ivs: Sequence[SSAValue]) -> bool:
    return len(forms) == len(ivs) and all(f is not None and f == LinearForm.of(v) for f, v in zip(forms, ivs))


def _parse_step(nest: affine.ForOp, source: SSAValue) -> _Step:
    """`nest` as an epilogue step reading `source` (a memref value), or Refused."""
    band = perfect_band(nest)
    if (any(constant_bounds(loop) is None or constant_bounds(loop)[0] != 0 or step_of(loop) != 1 for loop in band)
            or any(isinstance(r.type, VectorType) for o in nest.walk() for r in o.results)):
        raise Refused(f"{_what(nest)} is not the textbook elementwise nest (already scheduled: vectorized?)")
    ivs = [loop.body.block.args[0] for loop in band]
    body = [o for o in band[-1].body.block.ops if not isinstance(o, affine.YieldOp)]
    store = body[-1] if body else None
    shape = [constant_bounds(loop)[1] for loop in band]  # type: ignore[index]
    if (not isinstance(store, affine.StoreOp) or list(store.memref.type.get_shape()) != shape
            or not _identity(map_forms(store.map.data, store.indices), ivs)):
        raise Refused(f"{_what(nest)} is not the textbook elementwise nest (one store, at its iteration's element)")
    step = _Step(nest, ivs, body[:-1], source, store)
    reads_source = False
    for op in step.ops:
        if not isinstance(op, affine.LoadOp) and any(defined_outside(v, band[-1]) for v in op.operands):
            raise Refused(f"{_what(nest)} computes with a value from outside its nest")
        if isinstance(op, affine.LoadOp):
            reads_source |= _classify_load(step, op)
        elif isinstance(op, arith.SelectOp):
            step.extrema[op] = _extremum(step, op)
        elif not isinstance(op, (*ELEMENTWISE, arith.CmpfOp)) and not _float_constant(op):
            raise Refused(f"{_what(nest)} holds '{op.name}', which has no vector form here")
    for cmp in (o for o in step.ops if isinstance(o, arith.CmpfOp)):
        if cmp not in (c for _, c in step.extrema.values()):
            raise Refused(f"{_what(nest)} compares values ('arith.cmpf') other than for a max or min")
    if not reads_source:
        raise Refused(f"{_what(nest)} does not read {value_name(source)}")
    return step


def _classify_load(step: _Step, load: affine.LoadOp) -> bool:
    """Whether `load` reads the value so far (else it is an operand, kept in `step`)."""
    forms = map_forms(load.map.data, load.indices)
    if memref_root(load.memref) is memref_root(step.source) and memref_root(step.source) is not None:
        if load.memref is not step.source or not _identity(forms, step.ivs):
            raise Refused(f"{_what(step.nest)} reads {describe_access(load)}, not the element it writes "
                          f"(a transpose or a broadcast of {value_name(step.source)})")
        return True
    if any(f is None or any(v not in step.ivs for v in f.coeffs) for f in forms):
        raise Refused(f"{_what(step.nest)} reads {describe_access(load)}, at subscripts that are not its loops' "
                      "indices")
    step.operands.append(load)
    return False


def _extremum(step: _Step, select: arith.SelectOp) -> tuple[type[Operation], Operation]:
    """relu's `select(cmpf ugt %x, c), %x, c)`: `maximumf %x, c` on vectors, as
    loom-vectorize makes it (`extremum`), and its comparison, dropped with it."""
    found = extremum(select)
    if found is None:
        raise Refused(f"{_what(step.nest)} selects ('arith.select') other than for a max or min with a constant")
    return found


def _zero_constant(t: Attribute) -> arith.ConstantOp:
    """A zero of type `t`, a scalar or a vector, integer (an i32 accumulator's) or float."""
    element = t.element_type if isinstance(t, VectorType) else t
    zero = 0 if isinstance(element, IntegerType) else 0.0
    if isinstance(t, VectorType):
        return arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(t, [zero] * t.get_shape()[0]))
    return arith.ConstantOp(IntegerAttr(zero, t) if isinstance(t, IntegerType) else FloatAttr(zero, t))


def _float_constant(op: Operation) -> bool:
    return isinstance(op, arith.ConstantOp) and isinstance(op.value, FloatAttr)


# --------------------------------------------------------------------------------------
# Buffers and who touches them
# --------------------------------------------------------------------------------------


def _top(op: Operation, block: Block) -> Operation | None:
    """The ancestor of `op` (itself included) that sits in `block`."""
    cur: Operation | None = op
    while cur is not None and cur.parent_block() is not block:
        cur = cur.parent_op()
    return cur


def _users(root: SSAValue, block: Block) -> list[Operation]:
    """The ops of `block` that use `root` or a view of it, in block order (the view ops
    themselves included)."""
    found: dict[Operation, None] = {}
    pending = [root]
    while pending:
        value = pending.pop()
        for use in value.uses:
            if isinstance(use.operation, VIEW_OPS):
                pending.extend(use.operation.results)
            top = _top(use.operation, block)
            if top is not None:
                found[top] = None
    return sorted(found, key=block.get_operation_index)


def _writers(root: SSAValue, before: Operation, block: Block) -> list[Operation]:
    return [o for o in _users(root, block) if block.get_operation_index(o) < block.get_operation_index(before)
            and may_write(o, root)]


def _views_to_move(value: SSAValue, op: Operation, block: Block) -> list[Operation] | None:
    """The view ops of `block` after `op` that make `value` from values defined before
    it, in order (none when `value` is defined before `op`): moved before `op`, they
    change nothing (a view reads and writes no memory); None when `value` is made after
    `op` in another way."""
    if _defined_before(value, op, block):
        return []
    owner = value.owner
    if not isinstance(owner, VIEW_OPS) or owner.parent_block() is not block or owner.regions:
        return None
    moves: list[Operation] = []
    for operand in owner.operands:
        inner = _views_to_move(operand, op, block)
        if inner is None:
            return None
        moves += [v for v in inner if v not in moves]
    return [*moves, owner]


def _defined_before(value: SSAValue, op: Operation, block: Block) -> bool:
    """Whether `value` is an argument of `block` or made by an op of it before `op`."""
    owner = value.owner
    if isinstance(owner, Block):
        return owner is block
    return owner.parent_block() is block and block.get_operation_index(owner) < block.get_operation_index(op)


# --------------------------------------------------------------------------------------
# Where the stores write: the producer's result, or a row-major view of it
# --------------------------------------------------------------------------------------


@dataclass
class _Operand:
    """How a store reads one operand of the epilogue: `memref` (the operand, or a view of
    it in the store's index space, made when the fusion is applied) at, per dimension,
    `const + sum(coeffs[p] * the store's subscript p)`; `lane_stride` elements apart
    along the vector."""

    memref: SSAValue
    rows: list[tuple[tuple[int, ...], int]]
    lane_stride: int
    view: tuple[list[int], list[int], int] | None = None  # (sizes, strides, offset) of the view to make


@dataclass(frozen=True)
class _Space:
    """The index space of stores into a view of the result: a row-major reshape of it
    (`shape`) with its dimensions in the order `order` (a conv2d's Y as a matrix, order
    0, 1; as its panels' columns, P x rows x NR, order 1, 0, 2: dimension `order[p]` of
    the reshape is dimension p of the view)."""

    shape: tuple[int, ...]
    order: tuple[int, ...]

    @property
    def reshape(self) -> list[int]:
        return [self.shape[self.order.index(d)] for d in range(len(self.shape))]


def _space(store_memref: SSAValue, c: SSAValue) -> _Space | None:
    """None when the stores index the result itself; their space when they index a
    row-major reshape of it with its dimensions permuted; Refused for any other view."""
    if store_memref is c:
        return None
    cast = store_memref.owner
    layout = static_strides(store_memref.type)
    if (isinstance(cast, memref.ReinterpretCastOp) and cast.source is c and not cast.offsets and not cast.sizes
            and not cast.strides and layout is not None and layout[1] == 0 and contiguous(c.type)
            and math.prod(store_memref.type.get_shape()) == math.prod(c.type.get_shape())):
        shape, strides = list(store_memref.type.get_shape()), layout[0]
        # the view's dimensions from the outermost in memory (those of extent 1 first, whose
        # strides address nothing): a row-major reshape in that order
        outer = sorted(range(len(shape)), key=lambda d: (shape[d] != 1, -strides[d], d))
        order = tuple(outer.index(d) for d in range(len(shape)))
        row_major = row_major_strides([shape[d] for d in outer])
        if all(strides[d] == s for d, s in zip(outer, row_major) if shape[d] != 1):
            return _Space(tuple(shape), order)
    raise Refused(f"the producer stores {value_name(c)} through {value_name(store_memref)}, not a row-major "
                  "reshape of it (its dimensions in any order)")


def _plan_operand(step: _Step, load: affine.LoadOp, space: _Space | None, vectors: bool) -> _Operand:
    """How the stores of an index space read `load`'s operand (see _Operand)."""
    mtype = load.memref.type
    layout = static_strides(mtype)
    if layout is None:
        raise Refused(f"operand {value_name(load.memref)} of {_what(step.nest)} has no static strided layout")
    strides, offset = layout
    forms = [f for f in map_forms(load.map.data, load.indices) if f is not None]
    rows = [(tuple(f.coeff(v) for v in step.ivs), f.const) for f in forms]
    if not rows:  # a 0-d operand (a quantization's scale): the same scalar for every element
        return _Operand(load.memref, [], 0)
    if space is None:
        lane = sum(coeffs[-1] * s for (coeffs, _), s in zip(rows, strides)) if step.ivs else 0
        operand = _Operand(load.memref, rows, lane)
    else:
        logical = [sum(coeffs[p] * s for (coeffs, _), s in zip(rows, strides)) for p in range(len(step.ivs))]
        start = offset + sum(const * s for (_, const), s in zip(rows, strides))
        shape = list(step.store.memref.type.get_shape())
        reshaped = reshape_strides(shape, logical, space.reshape)
        if reshaped is None:
            raise Refused(f"operand {value_name(load.memref)} of {_what(step.nest)}, read as "
                          f"{describe_access(load)}, has no view in the producer's index space {list(space.shape)} "
                          f"(its strides over {shape} are {logical})")
        ranks = len(space.shape)
        strides = [reshaped[space.order[p]] for p in range(ranks)]
        identity = [(tuple(int(p == q) for q in range(ranks)), 0) for p in range(ranks)]
        operand = _Operand(load.memref, identity, strides[-1], (list(space.shape), strides, start))
    if vectors and operand.lane_stride not in (0, 1):
        raise Refused(f"operand {value_name(load.memref)} of {_what(step.nest)} is read {operand.lane_stride} "
                      f"elements apart along the vector (only 0, a broadcast, or 1)")
    return operand


# --------------------------------------------------------------------------------------
# The fusion
# --------------------------------------------------------------------------------------


@dataclass
class _Fusion:
    block: Block
    c: SSAValue  # the producer's result, an allocation
    nests: list[affine.ForOp]  # the nests that write it (zero fills, the producer's)
    steps: list[_Step]
    analysis: LastWriteAnalysis
    spaces: dict[SSAValue, _Space | None]  # store memref -> its index space
    operands: dict[tuple[SSAValue, affine.LoadOp], _Operand] = field(default_factory=dict)
    stopped: str = ""  # why the chain ends before `stopped_at`, for the remark
    stopped_at: affine.ForOp | None = None
    #: views of operands made after the producer's first nest, moved before it
    moves: list[Operation] = field(default_factory=list)

    @property
    def result(self) -> SSAValue:
        return self.steps[-1].out

    @property
    def producer(self) -> affine.ForOp:
        return next(n for n in self.nests if nest_tag(n) in PRODUCERS)


def _plan(first: affine.ForOp, block: Block) -> _Fusion | None:
    """The fusion of the elementwise nest `first` (and the chain after it) into the
    producer whose result it reads; None when it reads no producer's result (with a
    remark when it does but cannot be fused)."""
    candidates = _producer_results(first, block)
    if not candidates:
        return None
    c, nests = candidates[0]
    try:
        fusion = _first_step(first, block, c, nests)
    except Refused as why:
        producer = next(n for n in nests if nest_tag(n) in PRODUCERS)
        remark(LoomFuseEpiloguePass.name, first, f"{_what(first)} not fused into {_nest_text(producer)}: {why}",
               missed=True)
        return None
    _extend(fusion)
    return fusion


def _producer_results(nest: affine.ForOp, block: Block) -> list[tuple[SSAValue, list[affine.ForOp]]]:
    """The buffers `nest` reads that a producer nest wrote before it, with the nests
    that write each; the one written last first."""
    found = []
    for load in (o for o in nest.walk() if isinstance(o, LOADS)):
        root = memref_root(access_memref(load))
        if root is None or any(root is r for r, _ in found):
            continue
        writers = _writers(root, nest, block)
        if writers and any(nest_tag(w) in PRODUCERS for w in writers if isinstance(w, affine.ForOp)):
            found.append((root, writers))
    return sorted(found, key=lambda f: -block.get_operation_index(f[1][-1]))


def _first_step(first: affine.ForOp, block: Block, c: SSAValue, writers: list[Operation]) -> _Fusion:
    if not isinstance(c.owner, BUFFER_OPS) or c.owner.parent_block() is not block:
        raise Refused(f"{value_name(c)} is a result of the function: it must still be written")
    nests: list[affine.ForOp] = []
    for w in writers:
        if not isinstance(w, affine.ForOp) or nest_tag(w) not in (*PRODUCERS, *INITS):
            raise Refused(f"{value_name(c)} is also written by {w.name}{line_suffix(w)}")
        nests.append(w)
    step = _parse_step(first, c)
    for user in _users(c, block):
        if user not in nests and user is not first and not isinstance(user, (*VIEW_OPS, memref.DeallocOp)):
            raise Refused(f"{value_name(c)} is also used by {_describe_op(user)}: it must still be written")
    analysis = LastWriteAnalysis(c, nests)
    spaces = {access_memref(w.op): _space(access_memref(w.op), c) for w in analysis.writes.values()
              if w.when is not None}
    if not spaces:
        raise Refused(f"none of the stores of {value_name(c)} is the last write of its elements")
    fusion = _Fusion(block, c, nests, [], analysis, spaces)
    _accept(fusion, step)
    return fusion


def _describe_op(op: Operation) -> str:
    if isinstance(op, affine.ForOp):
        return f"nest '{nest_tag(op) or 'untagged'}'{line_suffix(op)}"
    return f"'{op.name}'{line_suffix(op)}"


def _accept(fusion: _Fusion, step: _Step) -> None:
    """Add `step` to the epilogue, or Refused (nothing changed) saying why not."""
    block, start = fusion.block, fusion.nests[0]
    out = step.out
    if out.type.get_shape() != fusion.c.type.get_shape() or static_strides(out.type) != static_strides(fusion.c.type):
        raise Refused(f"its result {value_name(out)} is a {out.type}, not laid out as {fusion.c.type}")
    for user in _users(out, block):
        if user is not step.nest and block.get_operation_index(start) <= block.get_operation_index(user) \
                < block.get_operation_index(step.nest):
            raise Refused(f"its result {value_name(out)} is used by {_describe_op(user)} before it")
    if not _defined_before(out, start, block) and not isinstance(out.owner, BUFFER_OPS):
        raise Refused(f"its result {value_name(out)} is made after the producer")
    chain = [fusion.c, *(s.out for s in fusion.steps), out]
    moves: list[Operation] = []
    for load in step.operands:
        root = memref_root(load.memref)
        if root is None or any(root is memref_root(v) for v in chain):
            raise Refused(f"it reads {describe_access(load)}, a buffer the epilogue writes")
        views = _views_to_move(load.memref, start, block)
        if views is None:
            raise Refused(f"its operand {value_name(load.memref)} is made after the producer")
        moves += views
        if any(may_write(nest, root) for nest in fusion.nests):
            raise Refused(f"its operand {value_name(load.memref)} is written by the producer's nests")
        between = [o for o in _users(root, block)
                   if block.get_operation_index(start) <= block.get_operation_index(o)
                   < block.get_operation_index(step.nest) and may_write(o, root)]
        if between:
            raise Refused(f"its operand {value_name(load.memref)} is written by {_describe_op(between[0])} "
                          "after the producer")
    operands = {}
    for store_memref, space in fusion.spaces.items():
        vectors = any(isinstance(w.value.type, VectorType) for w in fusion.analysis.writes.values()
                      if w.when is not None and access_memref(w.op) is store_memref)
        for load in step.operands:
            operands[(store_memref, load)] = _plan_operand(step, load, space, vectors)
    fusion.operands.update(operands)
    fusion.moves += [v for v in dict.fromkeys(moves) if v not in fusion.moves]
    fusion.steps.append(step)


def _extend(fusion: _Fusion) -> None:
    """Take the elementwise nests after the first one, each reading the previous one's
    result at the element it writes, while they can be fused (`stopped` says why not)."""
    block = fusion.block
    while len(fusion.steps) < MAX_STEPS:
        last = fusion.steps[-1]
        out = last.out
        users = [u for u in _users(out, block) if u is not last.nest and not isinstance(u, memref.DeallocOp)]
        if not users or not isinstance(users[0], affine.ForOp) or nest_tag(users[0]) not in EPILOGUES:
            return
        following = users[0]
        try:
            if not isinstance(out.owner, BUFFER_OPS):
                raise Refused(f"{value_name(out)} is a result of the function: it must still be written")
            if len(users) > 1:
                raise Refused(f"{value_name(out)} is also used by {_describe_op(users[1])}: it must still be written")
            _accept(fusion, _parse_step(following, out))
        except Refused as why:
            fusion.stopped = f"; {_what(following)} left as its own nest: {why}"
            fusion.stopped_at = following
            return
    users = [u for u in _users(fusion.result, block) if isinstance(u, affine.ForOp) and nest_tag(u) in EPILOGUES
             and u is not fusion.steps[-1].nest]
    if users:
        fusion.stopped = f"; {_what(users[0])} left as its own nest: an epilogue takes at most {MAX_STEPS} nests"
        fusion.stopped_at = users[0]


# --------------------------------------------------------------------------------------
# Rewriting
# --------------------------------------------------------------------------------------


class _Rewriter:
    """Applies a planned fusion (nothing here refuses: `_plan` checked it all)."""

    def __init__(self, fusion: _Fusion):
        self.f = fusion
        self.views: dict[tuple[SSAValue, tuple[int, ...], int], SSAValue] = {}
        self.cache: dict[tuple, SSAValue] = {}

    @property
    def retyped(self) -> bool:
        """Whether the epilogue changes the element type (i32 sums requantized to ui8): the
        result cannot hold the partial sums, so C stays where an earlier k panel's are
        read back, and the last writes store into the result as well."""
        return self.f.result.type.get_element_type() != self.f.c.type.get_element_type()

    def run(self) -> bool:
        """Apply the fusion; whether C is still written (a retyped epilogue's partial sums)."""
        f = self.f
        result, alloc = f.result, f.c.owner
        assert isinstance(alloc, Operation)
        if isinstance(result.owner, BUFFER_OPS) and f.block.get_operation_index(result.owner) > \
                f.block.get_operation_index(alloc):  # allocated where C was
            result.owner.detach()
            f.block.insert_op_before(result.owner, alloc)
        for view in f.moves:
            view.detach()
            f.block.insert_op_before(view, f.nests[0])
        for write in f.analysis.writes.values():
            if write.when is not None:
                self._epilogue(write)
        if not f.analysis.keep_fill:
            self._drop_fill()
        for step in f.steps:
            step.nest.detach()
            step.nest.erase(safe_erase=False)
        kept = self.retyped and self._reads_c()
        dropped = [*([] if kept else [f.c]), *(s.out for s in f.steps[:-1])]
        if self.retyped and not kept:  # C only written, never read back: its stores go, and
            # the prefetches of its lines for writing (loom-prefetch)
            for nest in self._nests():
                for op in [o for o in nest.walk() if isinstance(o, (*STORES, PrefetchOp))
                           and memref_root(access_memref(o)) is f.c]:
                    op.detach()
                    op.erase()
        for buffer in dropped:
            for use in list(buffer.uses):
                if isinstance(use.operation, memref.DeallocOp):
                    use.operation.detach()
                    use.operation.erase()
        if not self.retyped:
            f.c.replace_all_uses_with(result)
        for buffer in dropped:
            for view in [u.operation for u in buffer.uses if isinstance(u.operation, VIEW_OPS)]:
                if not view.results[0].uses:
                    view.detach()
                    view.erase()
            buffer.owner.detach()  # type: ignore[union-attr]
            buffer.owner.erase()  # type: ignore[union-attr]
        return kept

    def _nests(self) -> list[affine.ForOp]:
        """The nests that write C and are still there (the zero fill may be gone)."""
        return [nest for nest in self.f.nests if nest.parent is not None]

    def _reads_c(self) -> bool:
        return any(isinstance(o, LOADS) and memref_root(access_memref(o)) is self.f.c
                   for nest in self._nests() for o in nest.walk())

    def _epilogue(self, write: Access) -> None:
        store, ops = write.op, []
        value = write.value
        guard = self._guard(write, ops)
        result = self._result_view(access_memref(store)) if self.retyped else None
        if result is not None and guard is not None:
            # the epilogue and the result's own store in the last panel alone (computed
            # at every k step of a nest that streams rows, it cost 5% on 1x1 C256 14^2);
            # values made there are not shared with other stores (a cache of their own)
            saved, self.cache, inner = self.cache, {}, []
            new = self._epilogue_value(write, value, inner)
            self.cache = saved
            ops.append(scf.IfOp(guard, [], Region(Block([*inner, _store_like(store, new, result), scf.YieldOp()]))))
        else:
            new = self._epilogue_value(write, value, ops)
            if result is not None:  # the result's store instead of C's: nothing reads an element after its last write
                ops.append(_store_like(store, new, result))
            elif guard is not None:
                select = arith.SelectOp(guard, new, value)
                ops.append(select)
                new = select.result
        for op in (o for top in ops for o in top.walk()):
            if not line_suffix(op):
                op.location = store.location
        store.parent_block().insert_ops_before(ops, store)  # type: ignore[union-attr]
        if not self.retyped:
            store.operands[0 if isinstance(store, AFFINE_STORES) else len(store.operands) - 1] = new
        elif guard is None:
            store.detach()
            store.erase()

    def _epilogue_value(self, write: Access, value: SSAValue, ops: list[Operation]) -> SSAValue:
        for step in self.f.steps:
            value = self._step(step, write, value, ops)
        return value

    def _result_view(self, stored: SSAValue) -> SSAValue:
        """The result, or its view in the index space of a store into a view of C (a
        conv2d's Y as a matrix)."""
        if stored is self.f.c:
            return self.f.result
        layout = static_strides(stored.type)
        assert layout is not None  # (`_space`)
        return self._view_of(self.f.result, list(stored.type.get_shape()), list(layout[0]), 0)

    def _drop_fill(self) -> None:
        """The loads that read the zero fill read a zero instead (no load at all where
        that is always so: K in one panel), and the zero fill goes: C written once."""
        for load in self.f.analysis.loads:
            if load.when is None:
                continue
            op, ops = load.op, []
            zero = self._zero(op.results[0].type, op.parent_block(), ops)
            value = zero
            if load.when:
                guard = self._cached(("first", op.parent_block(), tuple(load.when)),
                                     lambda: _first_iteration(load.when), ops)
                select = arith.SelectOp(guard, zero, op.results[0])
                ops.append(select)
                value = select.result
            for new in ops:
                new.location = op.location
            op.results[0].replace_uses_with_if(value, lambda use: use.operation is not value.owner)
            op.parent_block().insert_ops_after(ops, op)  # type: ignore[union-attr]
            if not load.when:
                op.detach()
                op.erase()
        for nest in self.f.nests:
            if nest_tag(nest) in INITS:
                used = [v for o in nest.walk() for v in o.operands if not nest.is_ancestor(v.owner)]
                if isinstance(nest.prev_op, arith.ConstantOp):  # its scalar zero (a vectorized fill: unused)
                    used.append(nest.prev_op.result)
                nest.detach()
                nest.erase()
                for v in dict.fromkeys(used):  # the zero constant above the fill
                    if isinstance(v.owner, arith.ConstantOp) and not v.uses:
                        v.owner.detach()
                        v.owner.erase()

    def _zero(self, t, block: Block | None, ops: list[Operation]) -> SSAValue:
        return self._cached(("zero", block, t), lambda: [_zero_constant(t)], ops)

    def _cached(self, key: tuple, make, ops: list[Operation]) -> SSAValue:
        """One value per block for `key` (guards, operand loads and splats repeat across
        the stores of a register block)."""
        if key not in self.cache:
            made = make()
            ops.extend(made)
            self.cache[key] = made[-1].results[0]
        return self.cache[key]

    def _guard(self, write: Access, ops: list[Operation]) -> SSAValue | None:
        """`true` when every loop of `write.when` is in its last iteration (None: always)."""
        if not write.when:
            return None
        block = write.op.parent_block()
        return self._cached(("guard", block, tuple(write.when)), lambda: _last_iteration(write.when), ops)

    def _step(self, step: _Step, write: Access, value: SSAValue, ops: list[Operation]) -> SSAValue:
        lanes = value.type.get_shape() if isinstance(value.type, VectorType) else None

        def vector_of(t: Attribute) -> VectorType:  # (each op's own element type: casts change it)
            return VectorType(t, lanes)

        vectors = lanes is not None
        mapping: dict[SSAValue, SSAValue] = {}
        dropped = {cmp for _, cmp in step.extrema.values()}
        block = write.op.parent_block()
        for op in step.ops:
            if isinstance(op, affine.LoadOp):
                mapping[op.result] = value if op not in step.operands else self._load(step, op, write, lanes, ops)
            elif vectors and op in dropped:
                continue
            elif vectors and _float_constant(op):
                c, splat = op.value.value.data, vector_of(op.results[0].type)  # type: ignore[attr-defined]
                mapping[op.results[0]] = self._cached(
                    ("splat", block, repr(c), splat),
                    lambda c=c, splat=splat: [arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(
                        splat, [c] * splat.get_shape()[0]))],
                    ops)
            elif vectors and op in step.extrema:
                target = step.extrema[op][0]
                new = target.create(operands=[mapping[op.lhs], mapping[op.rhs]],
                                    result_types=[vector_of(op.results[0].type)])
                new.location = op.location
                ops.append(new)
                mapping[op.results[0]] = new.results[0]
            elif vectors:
                new = type(op).create(operands=[mapping[v] for v in op.operands],
                                      result_types=[vector_of(op.results[0].type)],
                                      properties=dict(op.properties), attributes=dict(op.attributes))
                new.location = op.location
                ops.append(new)
                mapping[op.results[0]] = new.results[0]
            else:
                new = op.clone(value_mapper=mapping)
                ops.append(new)
        return mapping[step.store.value]

    def _load(self, step: _Step, load: affine.LoadOp, write: Access, lanes: Sequence[int] | None,
              ops: list[Operation]) -> SSAValue:
        """The operand `load` reads, at what `write` stores: a scalar, a vector (masked
        like the store) or a broadcast scalar, of the operand's element type."""
        vtype = None if lanes is None else VectorType(load.result.type, lanes)
        operand = self.f.operands[(access_memref(write.op), load)]
        mem = self._view(operand, ops)
        strides = static_strides(mem.type)[0]  # type: ignore[index]
        forms = [sum((f * c for f, c in zip(write.forms, coeffs)), LinearForm(const=const)) if stride else LinearForm()
                 for (coeffs, const), stride in zip(operand.rows, strides)]  # any index of a broadcast: 0
        block = write.op.parent_block()
        key = (block, mem, tuple((tuple(sorted((id(v), a) for v, a in f.coeffs.items())), f.const) for f in forms))
        element = load.result.type
        exprs, values = affine_exprs(forms)
        amap = AffineMapAttr(AffineMap(len(values), 0, tuple(exprs)))
        if vtype is None or operand.lane_stride == 0:
            scalar = self._cached(("load", *key), lambda: [affine.LoadOp(mem, values, amap, element)], ops)
            if vtype is None:
                return scalar
            return self._cached(("broadcast", block, scalar), lambda: [vector.BroadcastOp(scalar, vtype)], ops)
        if isinstance(write.op, vector.MaskedStoreOp):
            mask = write.op.mask

            def masked() -> list[Operation]:
                made: list[Operation] = []
                indices = [_index_value(f, made) for f in forms]
                zero = _zero_constant(vtype)
                return [*made, zero, vector.MaskedLoadOp(mem, indices, mask, zero.result)]

            same_mask = (write.lanes,) if write.exact else (mask,)  # masks of one count are alike
            return self._cached(("masked", *key, *same_mask), masked, ops)
        return self._cached(("vector", *key, vtype), lambda: [affine.VectorLoadOp(mem, values, amap, vtype)], ops)

    def _view(self, operand: _Operand, ops: list[Operation]) -> SSAValue:
        """The operand itself, or its view in the store's index space (made once, before
        the producer's first nest)."""
        if operand.view is None:
            return operand.memref
        return self._view_of(operand.memref, *operand.view)

    def _view_of(self, source: SSAValue, sizes: list[int], strides: list[int], offset: int) -> SSAValue:
        """`source` viewed so (`strided_view`), made once, before the producer's first nest."""
        key = (source, tuple(strides), offset)
        if key not in self.views:
            cast = strided_view(source, sizes, strides, offset)
            cast.location = self.f.nests[0].location
            cast.results[0].name_hint = f"{source.name_hint or 'operand'}_view"
            self.f.block.insert_op_before(cast, self.f.nests[0])
            self.views[key] = cast.results[0]
        return self.views[key]


def _store_like(store: Operation, value: SSAValue, memref_value: SSAValue) -> Operation:
    """A store of `value` into `memref_value` where `store` stores (its indices, map or mask)."""
    if isinstance(store, affine.StoreOp):
        return affine.StoreOp(value, memref_value, list(store.indices), store.map)
    if isinstance(store, affine.VectorStoreOp):
        return affine.VectorStoreOp(value, memref_value, list(store.indices), store.map)
    assert isinstance(store, vector.MaskedStoreOp)
    return vector.MaskedStoreOp(memref_value, list(store.indices), store.mask, value)


def _index_value(form: LinearForm, ops: list[Operation]) -> SSAValue:
    if form.is_value():
        return next(iter(form.coeffs))
    exprs, values = affine_exprs([form])
    apply = affine.ApplyOp(values, AffineMapAttr(AffineMap(len(values), 0, tuple(exprs))))
    ops.append(apply)
    return apply.result


def _first_iteration(loops: list[affine.ForOp]) -> list[Operation]:
    """Ops computing whether each of `loops` is in its first iteration (their `and`)."""
    ops: list[Operation] = []
    conditions: list[SSAValue] = []
    for loop in loops:
        iv = loop.body.block.args[0]
        bounds = constant_bounds(loop)
        if bounds is not None:
            start = arith.ConstantOp(IntegerAttr.from_index_int_value(bounds[0]))
        else:
            start = affine.ApplyOp(loop.lowerBoundOperands, loop.lowerBoundMap)
        test = arith.CmpiOp(iv, start, "eq")
        ops += [start, test]
        conditions.append(test.result)
    return ops + _conjunction(conditions)


def _conjunction(conditions: list[SSAValue]) -> list[Operation]:
    """`and` ops over `conditions` (none for one: its own op stays the last one made)."""
    made: list[Operation] = []
    result = conditions[0]
    for other in conditions[1:]:
        both = arith.AndIOp(result, other)
        made.append(both)
        result = both.result
    return made


def _last_iteration(loops: list[affine.ForOp]) -> list[Operation]:
    """Ops computing whether each of `loops` is in its last iteration (their `and`)."""
    ops: list[Operation] = []
    conditions: list[SSAValue] = []
    for loop in loops:
        iv = loop.body.block.args[0]
        bounds = constant_bounds(loop)
        if bounds is not None:  # iv >= the last iteration's value
            lb, ub = bounds
            last = arith.ConstantOp(IntegerAttr.from_index_int_value(lb + (ub - lb - 1) // step_of(loop) * step_of(loop)))
            test = arith.CmpiOp(iv, last, "sge")
            ops += [last, test]
        else:  # iv + step >= the upper bound
            ub = loop.upperBoundMap.data
            following = affine.ApplyOp([iv], AffineMapAttr(AffineMap(1, 0, (AffineExpr.dimension(0) + step_of(loop),))))
            bound = (affine.MinOp(loop.upperBoundOperands, loop.upperBoundMap) if len(ub.results) > 1
                     else affine.ApplyOp(loop.upperBoundOperands, loop.upperBoundMap))
            test = arith.CmpiOp(following, bound, "sge")
            ops += [following, bound, test]
        conditions.append(test.result)
    return ops + _conjunction(conditions)


# --------------------------------------------------------------------------------------
# The pass
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoomFuseEpiloguePass(ModulePass):
    name = "loom-fuse-epilogue"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        select_nests(op, None, self.name)  # the loom ops lowered first (an error says so)
        functions = [o for o in op.walk() if isinstance(o, func.FuncOp)]
        for block in [b for function in functions for b in function.body.blocks]:  # (cf branches: several)
            for cast in [o for o in block.ops if isinstance(o, affine.ForOp) and nest_tag(o) == "cast"]:
                _inline_widening(self.name, block, cast)
            stopped: set[Operation] = set()  # where a fused chain stopped, said in its remark
            for nest in [o for o in block.ops if isinstance(o, affine.ForOp) and nest_tag(o) in EPILOGUES]:
                if nest.parent is None or nest in stopped:
                    continue  # fused into a producer already, or the end of a chain
                fusion = _plan(nest, block)
                if fusion is not None:
                    summary = _summary(fusion)
                    remark(self.name, fusion.producer, summary(_Rewriter(fusion).run()))
                    if fusion.stopped_at is not None:
                        stopped.add(fusion.stopped_at)
            filled: set[SSAValue] = set()
            for init in [o for o in block.ops if isinstance(o, affine.ForOp) and nest_tag(o) in INITS]:
                _drop_lone_fill(block, init, filled)


def _inline_widening(pass_name: str, block: Block, cast: affine.ForOp) -> None:
    """A `cast` nest that widens a buffer (bf16 -> f32) into a temporary that one epilogue
    nest after it reads, each element where it writes it (a residual block's bf16 output,
    added in f32 to the next block's last conv2d): that nest reads the source and widens
    each element itself, and the cast nest and its temporary go. The epilogue then reads
    no buffer written after the producer, and fuses (bf16 ResNet-18, batch 8, one thread:
    layer1's second convs, residual add and relu unfused, 10.4 ms each; fused, 8.4)."""
    loads = [o for o in cast.walk() if isinstance(o, affine.LoadOp)]
    try:
        step = _parse_step(cast, loads[0].memref) if len(loads) == 1 else None
    except Refused:
        return
    if step is None or len(step.ops) != 2 or not isinstance(step.ops[1], arith.ExtFOp):
        return
    load, widen = step.ops
    temporary, source = step.out, load.memref
    users = [u for u in _users(temporary, block) if u is not cast and not isinstance(u, memref.DeallocOp)]
    if not isinstance(temporary.owner, memref.AllocOp) or len(users) != 1 or nest_tag(users[0]) not in EPILOGUES:
        return
    consumer = users[0]
    try:  # (its reads of the temporary at the element it writes, and its other reads and writes apart)
        reader = _parse_step(consumer, temporary)
    except Refused:
        return
    root = memref_root(source)
    between = [o for o in block.ops
               if block.get_operation_index(cast) < block.get_operation_index(o) < block.get_operation_index(consumer)]
    if (root is None or any(may_write(o, root) for o in between) or reader.out is temporary
            or temporary.type.get_shape() != reader.out.type.get_shape()):
        return
    reads = [o for o in reader.ops if isinstance(o, affine.LoadOp) and o.memref is temporary]
    for read in reads:
        element = affine.LoadOp(source, list(read.indices), read.map, load.result.type)
        wide = arith.ExtFOp(element.result, widen.result.type)
        parent = read.parent_block()
        assert parent is not None
        parent.insert_ops_before([element, wide], read)
        read.result.replace_all_uses_with(wide.result)
        read.detach()
        read.erase()
    for op in [cast, *(u for u in _users(temporary, block) if isinstance(u, memref.DeallocOp)), temporary.owner]:
        op.detach()
        op.erase()
    remark(pass_name, consumer, f"{_what(consumer)} reads {value_name(source)} and widens it to "
           f"{widen.result.type} itself: the cast nest before it and its temporary dropped")


def _drop_lone_fill(block: Block, init: affine.ForOp, filled: set[SSAValue]) -> None:
    """A producer whose result no epilogue took (none follows, or it was refused) still
    loses its zero fill where the analysis allows: its first reads of each element read
    a zero instead (no load at all where K fits one panel), and C is written once. The
    nests are those from the fill on that write the result, fills (a peeled fill has
    several) or the producer's (the main nest and its peeled copies; not the direct
    convolution's copy of its wide result into Y, which reads it); nothing after them
    may write it again. `filled`: the results seen already (one try per result)."""
    store = next((o for o in init.walk() if isinstance(o, STORES)), None)
    root = memref_root(access_memref(store)) if store is not None else None
    if root is None or root in filled:
        return
    filled.add(root)
    users = [u for u in _users(root, block) if not isinstance(u, (*VIEW_OPS, memref.DeallocOp))]
    run = users[users.index(init):]
    count = next((i for i, u in enumerate(run) if not (isinstance(u, affine.ForOp) and may_write(u, root)
                                                       and nest_tag(u) in (*INITS, *PRODUCERS))), len(run))
    nests, later = run[:count], run[count:]
    if not any(nest_tag(n) in PRODUCERS for n in nests) or any(may_write(u, root) for u in later):
        return
    producer = next(n for n in nests if nest_tag(n) in PRODUCERS)
    try:
        analysis = LastWriteAnalysis(root, nests)  # type: ignore[arg-type]
        kept = analysis.keep_fill
    except Refused as why:
        kept = str(why)
    if kept:
        remark(LoomFuseEpiloguePass.name, producer, f"the zero fill of {value_name(root)} kept: {kept}",
               missed=True)
        return
    _Rewriter(_Fusion(block, root, nests, [], analysis, {}))._drop_fill()  # type: ignore[arg-type]
    remark(LoomFuseEpiloguePass.name, producer, f"the zero fill of {value_name(root)} dropped, with no epilogue to "
           f"fuse: {_nest_text(producer)} reads a zero where it read the fill, and writes {value_name(root)} once")


def _summary(fusion: _Fusion) -> Callable[[bool], str]:
    """The remark of a fusion (made before it is applied: names as they were), given
    whether C is still written (a retyped epilogue's partial sums)."""
    writes = [w for w in fusion.analysis.writes.values() if w.when is not None]
    guards = sorted({", ".join(f"%{iv_name(loop)}" for loop in w.when) for w in writes if w.when})
    plain = sum(not w.when for w in writes)
    when = []
    if plain:
        when.append(f"{plain} unconditionally")
    if guards:
        when.append(f"{len(writes) - plain} in the last iteration of {' / '.join(guards)}")
    steps = ", ".join(_what(s.nest) for s in fusion.steps)
    keep = fusion.analysis.keep_fill
    fill = ("" if keep == "no zero fill" else f"; the zero fill kept: {keep}" if keep else
            "; the zero fill dropped: the loads that read it read zeros")
    head = (f"fused {steps} into {_nest_text(fusion.producer)}: applied where it writes each element of "
            f"{value_name(fusion.c)} for the last time, {len(writes)} store{'s' * (len(writes) != 1)} "
            f"({', '.join(when)}), into {value_name(fusion.result)}; ")
    c, result = value_name(fusion.c), value_name(fusion.result)
    c_type, result_type = fusion.c.type.get_element_type(), fusion.result.type.get_element_type()
    intermediates = [value_name(s.out) for s in fusion.steps[:-1]]

    def text(c_kept: bool) -> str:
        dropped = intermediates if c_kept else [c, *intermediates]
        gone = f"{' and '.join(dropped)} no longer written" if dropped else ""
        held = (f"{c} still holds the partial sums, which the nest reads back before its last writes ({c_type}; "
                f"{result} is {result_type})" if c_kept else "")
        return head + "; ".join(filter(None, [gone, held])) + fill + fusion.stopped

    return text

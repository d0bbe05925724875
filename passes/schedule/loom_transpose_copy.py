"""loom-transpose-copy{width=0 op=...}: a copy that transposes, vectorized as width x
width tiles transposed in registers.

A copy nest of two loops whose load walks its source along a unit-stride dimension that
is not the source's last (a transposed view: `x @ w.T`'s B, adjacent along k) while its
store walks the buffer's last dimension in the other loop is the one copy loom-vectorize
cannot vectorize: a vector load reads along the last dimension. loom-pack's panel copy
of a transposed B is such a nest (the offset in the panel outside k, see loom_pack.py),
and ran scalar: one load and one store per element, x @ w.T at 84 GFLOP/s where x @ w
ran 94 (128x3072x768, znver4, one thread).

Both loops are strip-mined by the width, in either order (the load's loop inside, as
loom-pack copies a panel wider than 8, or outside, as it copies one of at most 8 and as
a tiled loom.contiguous copies its tiles); each tile reads `width` vectors along the
source's unit-stride dimension (through
a view of its buffer with that dimension last: a reinterpret_cast, no copy), transposes
them with log2(width) rounds of `vector.shuffle` (round b exchanges, in each pair of rows
b apart, the lanes whose bit b differs from the row's: after every round, lane c of row
r holds what row c's lane r held), and stores `width` vectors along the buffer's last
dimension:

```mlir
affine.for %j_cp = 0 to 48 {                               // loom-transpose-copy{width=16}
  affine.for %k_cp = 0 to 64 {
    %v = affine.load %b[%k_cp, %j_cp] : memref<64x48xf32, strided<[1, 64]>>
    affine.store %v, %b_pack[0, %k_cp, %j_cp] : memref<1x64x48xf32>
  }
}
// becomes
%b_t = memref.reinterpret_cast %b to offset: [0], sizes: [48, 64], strides: [64, 1] : ...
affine.for %j_cp = 0 to 48 step 16 {
  affine.for %k_cp = 0 to 64 step 16 {
    %r0 = affine.vector_load %b_t[%j_cp, %k_cp] : memref<48x64xf32>, vector<16xf32>
    ...                                                   // rows 1 to 15: %b_t[%j_cp + r, %k_cp]
    %s0 = vector.shuffle %r0, %r1 [0, 16, 2, 18, ...] : vector<16xf32>, vector<16xf32>
    ...                                                   // 4 rounds of 16 shuffles
    affine.vector_store %t0, %b_pack[0, %k_cp, %j_cp] : memref<1x64x48xf32>, vector<16xf32>
    ...                                                   // columns 1 to 15: %b_pack[0, %k_cp + c, %j_cp]
  }
}
```

What the tiles do not cover runs as the original scalar nest does: the inner loop's last
iterations (fewer than the width) for the tiles' outer iterations, then the outer loop's
last iterations whole. Bounds may be `min`s (a partial panel, a partial k block; see
`loop_transforms.strip_mine`). A copy of f32 on AVX-512 moves 256 elements with 16 loads,
64 shuffles and 16 stores where the scalar nest ran 256 loads and 256 stores.

Left alone, with a remark saying why, where the nest is a transposing copy but: a loop
runs fewer iterations than the width, a bound of the inner loop uses the outer loop's iv,
the source's layout is not static, or source and buffer may alias. Nests that are not
transposing copies are left alone silently (every other nest of a matmul). `width=0`
takes the target's vector (as loom-vectorize does); any other width must be a power of two
of at least 2. Refused (LoomError): any other width.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, vector
from xdsl.dialects.builtin import AffineMapAttr, DenseArrayBase, IndexType, MemRefType, ModuleOp, VectorType, i64
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.passes import ModulePass

from passes.support.remarks import remark
from passes.support.target import host
from dialects.layout import dimension_last, may_alias, static_strides
from passes.analysis.affine_forms import map_forms
from passes.analysis.loop_utils import (
    constant_trip_count,
    defined_outside,
    describe_access,
    iv_name,
    loops_of_nest,
    raise_problems,
    select_nests,
    step_of,
    value_name,
)
from passes.schedule.loop_transforms import promote_single_iteration, rebuild_loop, shift_map_operand, strip_mine


@dataclass
class _Copy:
    """`buffer[store] = source[load]` over (outer, inner): the load moves along the
    source's dimension `along` (unit stride, not the last) with one loop, the store along
    the buffer's last dimension with the other (`load_inner`: the load's is the inner)."""

    outer: affine.ForOp
    inner: affine.ForOp
    load: affine.LoadOp
    store: affine.StoreOp
    along: int
    load_inner: bool


@dataclass(frozen=True)
class LoomTransposeCopyPass(ModulePass):
    name = "loom-transpose-copy"

    width: int = 0
    op: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        raise_problems(self.name, [
            f"option 'width' must be a power of two of at least 2 (or 0: the target's), got {self.width}"
            if self.width < 0 or self.width == 1 or self.width & (self.width - 1) else None,
        ])
        for nest in select_nests(op, self.op, self.name):
            for copy in [c for loop in loops_of_nest(nest) if (c := _transposing_copy(loop)) is not None]:
                width = self.width or host().lanes(copy.load.result.type.bitwidth // 8)
                why = _refusal(copy, width)
                if why:
                    remark(self.name, copy.outer, f"copy of {value_name(copy.load.memref)} into "
                           f"{value_name(copy.store.memref)} left scalar: {why}", missed=True)
                    continue
                names = [loop.body.block.args[0].name_hint for loop in (copy.outer, copy.inner)]
                what = (f"copy of {value_name(copy.load.memref)} into {value_name(copy.store.memref)}"
                        + (f" (loops %{names[0]}, %{names[1]})" if all(names) else ""))
                remark(self.name, copy.outer, f"{what} vectorized as {width}x{width} tiles transposed in "
                       f"registers: {width} vector loads along its unit-stride dimension, "
                       f"{width * (width.bit_length() - 1)} shuffles, {width} vector stores")
                _tile(copy, width)


def _coefficients(access: affine.LoadOp | affine.StoreOp, iv: SSAValue, inside: affine.ForOp) -> list[int] | None:
    """Per subscript of `access`, its coefficient in `iv`; None where a subscript is not
    linear, or uses a value defined in `inside` other than the ivs of its loops."""
    ivs = {loop.body.block.args[0] for loop in loops_of_nest(inside)}
    coefficients = []
    for form in map_forms(access.map.data, access.indices):
        if form is None or any(v not in ivs and not defined_outside(v, inside) for v in form.coeffs):
            return None
        coefficients.append(form.coeff(iv))
    return coefficients


def _transposing_copy(outer: affine.ForOp) -> _Copy | None:
    """The copy `outer` is the outer loop of, when it transposes (the module's doc)."""
    ops = [o for o in outer.body.block.ops if not isinstance(o, affine.YieldOp)]
    if len(ops) != 1 or not isinstance(inner := ops[0], affine.ForOp) or outer.results or inner.results:
        return None
    body = [o for o in inner.body.block.ops if not isinstance(o, affine.YieldOp)]
    if len(body) != 2 or not isinstance(load := body[0], affine.LoadOp) or not isinstance(store := body[1], affine.StoreOp):
        return None
    if store.value is not load.result or not isinstance(t := load.memref.type, MemRefType):
        return None
    layout = static_strides(t)
    if layout is None or t.get_num_dims() < 2:
        return None
    slayout = static_strides(store.memref.type)
    if slayout is None or slayout[0][-1] != 1:
        return None
    for load_loop, store_loop in ((inner, outer), (outer, inner)):
        along = _transposing(load, store, load_loop, store_loop, outer, layout[0])
        if along is not None:
            return _Copy(outer, inner, load, store, along, load_loop is inner)
    return None


def _transposing(load: affine.LoadOp, store: affine.StoreOp, load_loop: affine.ForOp, store_loop: affine.ForOp,
                 nest: affine.ForOp, strides: tuple[int, ...]) -> int | None:
    """The source dimension the load walks with unit stride along `load_loop` (one that
    is not the last) while the store walks the buffer's last dimension along
    `store_loop` and `load_loop` keeps it; else None."""
    lv, sv = load_loop.body.block.args[0], store_loop.body.block.args[0]
    load_coefficients = _coefficients(load, lv, nest)
    store_s, store_l = _coefficients(store, sv, nest), _coefficients(store, lv, nest)
    if load_coefficients is None or store_s is None or store_l is None:
        return None
    moving = [d for d, c in enumerate(load_coefficients) if c]
    if len(moving) != 1 or load_coefficients[moving[0]] != 1 or strides[moving[0]] != 1 or moving[0] == len(strides) - 1:
        return None
    if store_s[-1] != 1 or any(store_s[:-1]) or store_l[-1]:
        return None
    return moving[0]


def _refusal(copy: _Copy, width: int) -> str | None:
    """Why the transposing copy cannot be tiled by `width`, or None."""
    for loop in (copy.outer, copy.inner):
        if step_of(loop) != 1 or len(loop.lowerBoundMap.data.results) != 1:
            return f"%{iv_name(loop)} does not step by 1 from a single lower bound"
        trips = constant_trip_count(loop)
        if trips is not None and trips < width:
            return f"%{iv_name(loop)} runs {trips} iteration{'s' * (trips != 1)}, fewer than the width {width}"
    if not all(defined_outside(v, copy.outer) for v in (*copy.inner.lowerBoundOperands, *copy.inner.upperBoundOperands)):
        return f"the bounds of %{iv_name(copy.inner)} use %{iv_name(copy.outer)}"
    if may_alias(copy.load.memref, copy.store.memref):
        return f"{describe_access(copy.load)} and {describe_access(copy.store)} may be one buffer"
    return None


def _view(source: SSAValue, along: int, copy: affine.ForOp) -> SSAValue:
    """`source`'s buffer with its dimension `along` last (`dimension_last`: no copy),
    made before the outermost loop around `copy` that `source` is defined outside of."""
    view = dimension_last(source, along)
    view.result.name_hint = f"{source.name_hint or 'source'}_t"
    view.location = copy.location
    before: Operation = copy
    while isinstance(loop := before.parent_op(), affine.ForOp) and defined_outside(source, loop):
        before = loop
    before.parent_block().insert_op_before(view, before)
    return view.result


def _substituted(op: affine.LoadOp | affine.StoreOp, values: dict[SSAValue, tuple[SSAValue, int]]) -> tuple[AffineMap, list[SSAValue]]:
    """The map and operands of `op`'s subscripts with each operand in `values` replaced by
    (value, offset): value + offset."""
    m, operands = op.map.data, list(op.indices)
    for position, operand in enumerate(op.indices):
        if operand in values:
            value, offset = values[operand]
            operands[position] = value
            if offset:
                m = shift_map_operand(m, position, offset)
    return m, operands


def _loop(lower: tuple[AffineMap, list[SSAValue]], upper: tuple[AffineMap, list[SSAValue]], step: int,
          name: str | None, location) -> tuple[affine.ForOp, SSAValue]:
    block = Block(arg_types=[IndexType()])
    block.args[0].name_hint = name
    loop = affine.ForOp.from_region(lower[1], upper[1], [], [], AffineMapAttr(lower[0]), AffineMapAttr(upper[0]),
                                    Region(block), step)
    loop.location = location
    return loop, block.args[0]


def _transpose(rows: list[SSAValue], vtype: VectorType, emit) -> list[SSAValue]:
    """The columns of the width x width block whose rows are `rows`: round b (1, 2, 4,
    ...) exchanges, between rows r and r + b (bit b of r clear), the lanes c + b of row r
    and c of row r + b (bit b of c clear); shuffle lanes 0..w-1 are the first operand's,
    w..2w-1 the second's."""
    w = len(rows)
    b = 1
    while b < w:
        new = list(rows)
        for r in range(w):
            if r & b:
                continue
            low = [c if not c & b else w + c - b for c in range(w)]
            high = [c + b if not c & b else w + c for c in range(w)]
            new[r] = emit(vector.ShuffleOp(rows[r], rows[r + b], DenseArrayBase.from_list(i64, low), result_type=vtype))
            new[r + b] = emit(vector.ShuffleOp(rows[r], rows[r + b], DenseArrayBase.from_list(i64, high), result_type=vtype))
        rows, b = new, 2 * b
    return rows


def _tile(copy: _Copy, width: int) -> None:
    """Rewrite `copy` into width x width tiles transposed in registers, then the scalar
    nest for what they leave (the module's doc); a tile loop of one iteration (a tiled
    copy's width x width tile) is replaced by its body."""
    outer, inner, load, store = copy.outer, copy.inner, copy.load, copy.store
    o, i = outer.body.block.args[0], inner.body.block.args[0]
    along_load, along_store = (i, o) if copy.load_inner else (o, i)
    parent = outer.parent_block()
    assert parent is not None
    view = _view(load.memref, copy.along, outer)
    outer_split = strip_mine(outer, width)
    inner_split = strip_mine(inner, width)  # its ops, over values from outside `outer`, go before it
    for op in list(outer.body.block.ops):
        if op is inner:
            break
        op.detach()
        parent.insert_op_before(op, outer)
    assert outer_split.upper is not None and inner_split.upper is not None  # (_refusal: trips >= width)
    vtype = VectorType(load.result.type, [width])
    main, ob = _loop(outer_split.lower, outer_split.upper, width, o.name_hint, outer.location)
    tiles, ib = _loop(inner_split.lower, inner_split.upper, width, i.name_hint, inner.location)
    main.attributes.update(outer.attributes)  # (a nest's tag, when `outer` is its outermost loop)
    tiles.attributes.update(inner.attributes)
    main.body.block.add_op(tiles)
    ops: list[Operation] = []

    def emit(op: Operation) -> SSAValue:
        op.location = load.location
        ops.append(op)
        return op.results[0]

    base = {o: ob, i: ib}  # each loop's tile start
    rank = load.memref.type.get_num_dims()
    order = [d for d in range(rank) if d != copy.along] + [copy.along]
    rows = []
    for r in range(width):
        m, operands = _substituted(load, {along_store: (base[along_store], r), along_load: (base[along_load], 0)})
        m = AffineMap(m.num_dims, m.num_symbols, tuple(m.results[d] for d in order))
        rows.append(emit(affine.VectorLoadOp(view, operands, AffineMapAttr(m), vtype)))
    for c, column in enumerate(_transpose(rows, vtype, emit)):
        m, operands = _substituted(store, {along_store: (base[along_store], 0), along_load: (base[along_load], c)})
        ops.append(affine.VectorStoreOp(column, store.memref, operands, AffineMapAttr(m)))
        ops[-1].location = store.location
    tiles.body.block.add_ops([*ops, affine.YieldOp.get()])
    if inner_split.rest is not None:
        # the inner loop's last iterations, scalar, for the tile's w outer iterations
        d0 = AffineExpr.dimension(0)
        rest_outer, j = _loop((AffineMap.identity(1), [ob]), (AffineMap(1, 0, (d0 + width,)), [ob]), 1,
                             o.name_hint, outer.location)
        rest = inner.clone(value_mapper={o: j})
        rest_outer.body.block.add_op(rest)
        rebuild_loop(rest, lower=(AffineMap.identity(1), [inner_split.rest]))
        rest_outer.body.block.add_op(affine.YieldOp.get())
        main.body.block.add_op(rest_outer)
    main.body.block.add_op(affine.YieldOp.get())
    parent.insert_op_before(main, outer)
    for count in (outer_split.rest_count, inner_split.rest_count):  # (only a masked remainder uses them)
        if isinstance(count, SSAValue) and not count.uses:
            count.owner.detach()
            count.owner.erase()
    if outer_split.rest is None:
        parent.erase_op(outer)
    else:  # the outer loop's last iterations, scalar: the original nest from `rest`
        rebuild_loop(outer, lower=(AffineMap.identity(1), [outer_split.rest]))
    for loop in (tiles, main):
        if constant_trip_count(loop) == 1:
            promote_single_iteration(loop)

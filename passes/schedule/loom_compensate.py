"""loom-compensate{op=TAG}: s8 x s8 products on vpdpbusd, which multiplies unsigned bytes by
signed ones, through the +128 shift and a compensation term per column, as oneDNN's and
FBGEMM's int8 kernels run them.

`loom-pack{element=ui8}` stores A's i8 elements plus 128 as unsigned bytes (A' = A + 128,
0..255) and reads them back as `extui(A') - 128`. The statement is then

    C[i, j] += (extui(A'[i, k]) - 128) * extsi(B'[k, j])

and since the sum over k distributes, C[i, j] = sum_k A'[i, k] B'[k, j] - 128 sum_k B'[k, j]:
the first term is a u8 x s8 dot product (loom-dot: vpdpbusd), the second depends on the
column alone. This pass rewrites the nest so:

- the statement multiplies `extui(A')` by `extsi(B')` (the shift taken out of it);
- a buffer %comp (i32, B's panel layout without k: a lane per column) holds 128 x the sum
  of each column of the panel over the statement's k loop, computed once per packed panel,
  right after it is packed (before the loop that reads it), by a nest of the statement's
  own loops along B (its k and j loops, the rows dropped): `comp[j] = 0`, then
  `comp[j] += extui(s[k]) * extsi(B'[k, j])` with s a row of shifts (128 in each byte,
  %shift, laid out in groups like B's k): the same grouped reads as the statement, so
  that loom-dot runs it on vpdpbusd too (one instruction per group of 4 k and 16 columns:
  a panel's KC x NR bytes, read once more while they are in the caches);
- before the k loop, `C[i, j] -= comp[j]` over the statement's loops inside it (the
  register tile): once per tile of C and panel, where the fused zero fill reads a zero
  (loom-fuse-epilogue).

All of it is exact in i32 arithmetic modulo 2^32, as the loops' adds are: 128 x a column
sum of the bytes of a panel that the product sums would not overflow does not either.

```mlir
affine.for %i_t2 = ... step 4 {
  affine.for %k = %k_t to %k_t + 512 {
    affine.for %i = %i_t2 to %i_t2 + 4 {
      affine.for %j = %j_t2 to %j_t2 + 64 {
        %a = affine.load %a_pack[...] : memref<128x128x16xui8>
        %b = affine.load %b_pack[%slot, 0, (%k - %k_t) floordiv 4, (%j - %j_t2) * 4 + (%k - %k_t) mod 4]
        %x = arith_ext.extui %a : ui8 to i32
        %s = arith.subi %x, %c128 : i32
        ... C[%i, %j] += %s * extsi(%b)
// becomes
affine.for %j = %j_t2 to %j_t2 + 64 { affine.store %c0, %comp[%slot, 0, %j - %j_t2] }
affine.for %k = %k_t to %k_t + 512 {
  affine.for %j = %j_t2 to %j_t2 + 64 {
    %h = affine.load %shift[(%k - %k_t) floordiv 4, (%k - %k_t) mod 4] : memref<128x4xui8>
    %b = affine.load %b_pack[%slot, 0, (%k - %k_t) floordiv 4, (%j - %j_t2) * 4 + (%k - %k_t) mod 4]
    ... comp[%slot, 0, %j - %j_t2] += extui(%h) * extsi(%b)
affine.for %i_t2 = ... step 4 {
  affine.for %i = %i_t2 to %i_t2 + 4 {
    affine.for %j = %j_t2 to %j_t2 + 64 { C[%i, %j] -= comp[%slot, 0, %j - %j_t2] }
  affine.for %k = %k_t to %k_t + 512 {
    ... C[%i, %j] += extui(%a) * extsi(%b)
```

Options: `op=TAG` the nests tagged TAG. Each rewrite is a remark. With `op=`, a nest that
does not fit is refused (LoomError, nothing changed); without it, skipped with the reason
as a remark: a statement that is not `C[...] += (extui(x) - 128) * extsi(y)` in an innermost
loop with both reads in groups along one k loop (loom-pack{group=G}), B's buffer not one
loom-pack made, the k loop's iv read beside the grouped reads, a loop between it and the
statement holding more than the next, B's subscripts beside k not linear or not whole
groups, or a loop along B whose bounds depend on a row loop (the column sums would differ
from row to row).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects import affine, arith, memref
from xdsl.dialects.builtin import (
    AffineMapAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    Signedness,
    i32,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineMap

from dialects import arith_ext
from passes.analysis.affine_forms import LinearForm, affine_exprs, sum_of, sum_terms
from passes.analysis.grouped_reads import (
    GroupedRead,
    NotGrouped,
    group_loop,
    grouped_read,
    moves_with,
)
from passes.analysis.loop_utils import (
    enclosing_loops,
    iv_name,
    nest_tag,
    step_of,
    value_name,
)
from passes.conversion.convert_loom_to_affine import constant
from passes.schedule.loom_pack import SHIFT
from passes.schedule.loop_transforms import build_affine_nest, drop_unused_operands
from passes.schedule.nest_pass import NestPass
from passes.support.diagnostics import LoomError
from passes.support.remarks import remark

UI8 = IntegerType(8, Signedness.UNSIGNED)


class _Misfit(NotGrouped):
    """Why a nest's statement is not an s8 x s8 product through the shift."""


@dataclass
class _Compensation:
    store: affine.StoreOp  # the statement's
    shifted: Operation  # arith.subi(extui(A'), 128): the factor the shift is taken out of
    b: GroupedRead  # the other factor's read
    group: int
    k: affine.ForOp
    reader: affine.ForOp  # the loop after B's copy that holds the statement
    along: list[affine.ForOp]  # the loops from `reader` to the statement that walk B (k, j)
    comp_map: AffineMap  # the column's lane of %comp, over B's read's operands


@dataclass(frozen=True)
class LoomCompensatePass(NestPass[_Compensation]):
    name = "loom-compensate"

    op: str | None = None

    def plan(self, nest: affine.ForOp, misfit: str | None) -> _Compensation | str:
        try:
            return _match(nest)
        except NotGrouped as e:
            why = f"nest '{nest_tag(nest) or 'untagged'}' not rewritten: {e}"
            if self.op is not None:
                raise LoomError(f"{self.name}: {why}", nest) from None
            return why

    def rewrite(self, nest: affine.ForOp, plan: _Compensation) -> None:
        b_buffer = plan.b.load.memref
        btype = b_buffer.type
        assert isinstance(btype, MemRefType)
        g = plan.group
        shape = btype.get_shape()
        comp_alloc = memref.AllocOp.get(i32, 64, [*shape[:-2], shape[-1] // g])
        comp_alloc.memref.name_hint = "comp"
        shift_alloc = memref.AllocOp.get(UI8, 64, [shape[-2], g])
        shift_alloc.memref.name_hint = "shift"
        comp, shift = comp_alloc.memref, shift_alloc.memref
        # the row of shifts, filled once before the nest
        wide = constant(SHIFT, i32)
        byte = arith_ext.TruncIOp(wide.result, UI8)
        fill = build_affine_nest(["q", "g"], lambda ivs: [([LinearForm()], [LinearForm(const=n)]) for n in (shape[-2], g)],
                                 lambda ivs: [affine.StoreOp(byte.result, shift, ivs,
                                                             AffineMapAttr(AffineMap.identity(2)))])
        parent = nest.parent_block()
        assert parent is not None
        before = [comp_alloc, shift_alloc, wide, byte, fill]
        for new in before:
            parent.insert_op_before(new, nest)
        for buffer in (shift, comp):
            parent.insert_op_after(memref.DeallocOp.get(buffer), nest)

        def comp_at(mapping: dict[SSAValue, SSAValue]) -> tuple[list[SSAValue], AffineMapAttr]:
            return [mapping.get(v, v) for v in plan.b.load.indices], AffineMapAttr(plan.comp_map)

        # comp = 0 over the columns, then += 128 x B's elements over the statement's k loop
        zero = constant(0, i32)
        columns = [loop for loop in plan.along if loop is not plan.k]
        zeroing = _clone_loops(columns, lambda m: [_compact(affine.StoreOp(zero.result, comp, *comp_at(m)))], "sum")
        e = plan.b.e

        def column_sum(m: dict[SSAValue, SSAValue]) -> list[Operation]:
            at = e
            for old, new in m.items():
                at = at.substitute(old, LinearForm.of(new))
            exprs, operands = affine_exprs([at])
            h = affine.LoadOp(shift, operands, AffineMapAttr(AffineMap(len(operands), 0, (exprs[0] // g, exprs[0] % g))))
            read = plan.b.load
            b = _compact(affine.LoadOp(read.memref, [m.get(v, v) for v in read.indices], read.map))
            c = _compact(affine.LoadOp(comp, *comp_at(m)))
            hx, bx = arith_ext.ExtUIOp(h.result, i32), arith_ext.ExtSIOp(b.result, i32)
            product = arith.MuliOp(hx, bx)
            total = arith.AddiOp(c, product)
            return [h, b, c, hx, bx, product, total, _compact(affine.StoreOp(total.result, comp, *comp_at(m)))]

        summing = _clone_loops(plan.along, column_sum, "sum")
        block = plan.reader.parent_block()
        assert block is not None
        for new in (zero, zeroing, summing):
            block.insert_op_before(new, plan.reader)

        # C -= comp over the register tile, before the k loop
        store = plan.store

        def subtract(m: dict[SSAValue, SSAValue]) -> list[Operation]:
            indices = [m.get(v, v) for v in store.indices]
            c = _compact(affine.LoadOp(store.memref, indices, store.map))
            q = _compact(affine.LoadOp(comp, *comp_at(m)))
            d = arith.SubiOp(c, q)
            return [c, q, d, _compact(affine.StoreOp(d.result, store.memref, indices, store.map))]

        inner = [loop for loop in enclosing_loops(store) if plan.k.is_ancestor(loop) and loop is not plan.k]
        k_block = plan.k.parent_block()
        assert k_block is not None
        k_block.insert_op_before(_clone_loops(inner, subtract, "comp"), plan.k)
        for new in (*before, zero, zeroing, summing, *(o for o in k_block.ops if o is not plan.k)):
            for o in new.walk():
                o.location = store.location
        # the statement multiplies the shifted bytes as they are
        shifted = plan.shifted
        shifted.results[0].replace_all_uses_with(shifted.operands[0])
        shift_value = shifted.operands[1].owner
        shifted.detach()
        shifted.erase()
        if isinstance(shift_value, Operation) and not shift_value.results[0].uses:
            shift_value.detach()
            shift_value.erase()
        remark(self.name, nest,
               f"nest '{nest_tag(nest) or 'untagged'}': s8 x s8 products as u8 x s8: A's bytes read as packed "
               f"(+{SHIFT}), and {SHIFT} x the sums of B's columns over loop %{iv_name(plan.k)} ({value_name(comp)}, "
               f"from {value_name(b_buffer)} before loop %{iv_name(plan.reader)}, in groups of {g} as the "
               f"products) subtracted from {value_name(store.memref)} before loop %{iv_name(plan.k)}",
               group=g, comp=str(comp.type))


def _match(nest: affine.ForOp) -> _Compensation:
    stores = [o for o in nest.walk() if isinstance(o, affine.StoreOp)]
    if not stores:
        raise _Misfit("it stores nothing")
    store = stores[-1]
    j = store.parent_op()
    if not isinstance(j, affine.ForOp):
        raise _Misfit("its statement is not in a loop")
    add = store.value.owner
    if not isinstance(add, arith.AddiOp):
        raise _Misfit("its statement does not add integers to C")
    c, mul = (o.owner for o in add.operands)
    if isinstance(mul, affine.LoadOp):
        c, mul = mul, c
    if not isinstance(c, affine.LoadOp) or c.memref != store.memref or c.map != store.map or (
            list(c.indices) != list(store.indices)) or not isinstance(mul, arith.MuliOp):
        raise _Misfit("its statement is not C[i, j] += x * y")
    factors = [v.owner for v in mul.operands]
    shifted = next((f for f in factors if _is_shifted(f)), None)
    other = next((f for f in factors if f is not shifted), None)
    if shifted is None or not isinstance(other, arith_ext.ExtSIOp) or not isinstance(
            other.input.owner, affine.LoadOp) or str(other.input.type) != "i8":
        raise _Misfit(f"its product is not (extui(x) - {SHIFT}) * extsi(y) of ui8 x and i8 y "
                      "(pack A with loom-pack{element=ui8})")
    a_read, g = grouped_read(shifted.operands[0].owner.input.owner)
    b_read, gb = grouped_read(other.input.owner)
    if b_read.e != a_read.e or gb != g:
        raise _Misfit("its operands are not grouped along the same k")
    b_buffer = b_read.load.memref
    if not isinstance(b_buffer.owner, memref.AllocOp):
        raise _Misfit(f"{value_name(b_buffer)} is not a buffer of loom-pack's")
    k = group_loop(store, b_read.e, [a_read.load, b_read.load])
    loops = enclosing_loops(store)
    writes = _writes(b_buffer, nest)
    if not writes:
        raise _Misfit(f"{value_name(b_buffer)} is not written inside the nest (by loom-pack's copy)")
    reader = _reader(loops, writes)
    if reader is None or not reader.is_ancestor(k):
        raise _Misfit(f"the copy into {value_name(b_buffer)} is not in a loop around loop %{iv_name(k)}")
    inside = loops[loops.index(reader):]
    along = [loop for loop in inside if moves_with(b_read.start, list(b_read.load.indices), _iv(loop))
             or loop is k]
    rows = [loop for loop in inside if loop not in along]
    if any(_uses(loop, row) for loop in along for row in rows):
        raise _Misfit("a loop along B has bounds that depend on a row loop (each row's column sums would differ)")
    m = b_read.start
    terms = sum_terms(m.results[-1])
    if any(c % g for c, _ in terms):
        raise _Misfit(f"B's column subscript is not a whole group of {g}")
    comp_map = AffineMap(m.num_dims, m.num_symbols, (*m.results[:-2], sum_of([(c // g, f) for c, f in terms])))
    return _Compensation(store, shifted, b_read, g, k, reader, along, comp_map)


def _is_shifted(op: Operation | None) -> bool:
    """Whether `op` is `extui(load of ui8) - SHIFT` (loom-pack's read of a shifted buffer)."""
    if not isinstance(op, arith.SubiOp):
        return False
    x, s = (v.owner for v in op.operands)
    return (isinstance(x, arith_ext.ExtUIOp) and isinstance(x.input.owner, affine.LoadOp)
            and x.input.type == UI8 and isinstance(s, arith.ConstantOp)
            and isinstance(s.value, IntegerAttr) and s.value.value.data == SHIFT)


def _writes(buffer: SSAValue, nest: affine.ForOp) -> list[Operation]:
    return [u.operation for u in buffer.uses
            if isinstance(u.operation, affine.StoreOp | affine.VectorStoreOp) and nest.is_ancestor(u.operation)]


def _reader(loops: list[affine.ForOp], writes: list[Operation]) -> affine.ForOp | None:
    """The loop around the statement that follows B's copy in the copy's block."""
    for loop in loops:
        block = loop.parent_block()
        assert block is not None
        tops = [block.find_ancestor_op_in_block(w) for w in writes]
        if all(t is not None and block.get_operation_index(t) < block.get_operation_index(loop) for t in tops):
            return loop
    return None


def _uses(loop: affine.ForOp, other: affine.ForOp) -> bool:
    v = _iv(other)
    return any(x is v for x in (*loop.lowerBoundOperands, *loop.upperBoundOperands))


def _iv(loop: affine.ForOp) -> SSAValue:
    return loop.body.block.args[0]


def _compact(op: affine.LoadOp | affine.StoreOp) -> affine.LoadOp | affine.StoreOp:
    """`op` taking only the operands its map reads (the statement's accesses take every
    iv of the loops around it, the k loop's among them, which a copy outside it lacks)."""
    drop_unused_operands(op)
    return op


def _clone_loops(loops: Sequence[affine.ForOp], body: Callable[[dict[SSAValue, SSAValue]], list[Operation]],
                 suffix: str) -> affine.ForOp:
    """A nest of loops with the bounds and steps of `loops` (outermost first, each one's
    bounds over values outside or the ivs of those before it), around `body(mapping)`
    (mapping: each old iv to its copy's, named as it with `suffix`)."""
    mapping: dict[SSAValue, SSAValue] = {}
    blocks = []
    for loop in loops:
        block = Block(arg_types=[IndexType()])
        block.args[0].name_hint = f"{iv_name(loop)}_{suffix}"
        mapping[_iv(loop)] = block.args[0]
        blocks.append(block)
    blocks[-1].add_ops([*body(mapping), affine.YieldOp.get()])
    new: affine.ForOp | None = None
    for loop, block in reversed(list(zip(loops, blocks))):
        if new is not None:
            block.add_ops([new, affine.YieldOp.get()])
        new = affine.ForOp.from_region(
            [mapping.get(v, v) for v in loop.lowerBoundOperands], [mapping.get(v, v) for v in loop.upperBoundOperands],
            [], [], loop.lowerBoundMap, loop.upperBoundMap, Region(block), step_of(loop))
    assert new is not None
    return new

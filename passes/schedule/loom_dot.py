"""loom-dot{width=W op=TAG}: a low-precision matmul's products on the CPU's dot-product
instructions (x86vector.dot: vpmaddwd, vpdpbusd, vdpbf16ps), as oneDNN's and FBGEMM's
int8 and bf16 micro-kernels run them.

It takes the statement `C[i, j] += ext(A'[...]) * ext(B'[...])` of a nest whose two
operands `loom-pack{group=G}` laid out in groups of G along k (each panel row holds G
consecutive k of a column side by side: A' at `[p, e floordiv G, r_a + e mod G]` with
`e = k - k_t`, B' at `[p, e floordiv G, r_b + e mod G]`, r_b stepping by G along j),
and rewrites its loops:

- the k loop steps by G; each iteration reads A's group of G (`vector<Gxi16>`, one row,
  broadcast to every lane by the instruction) and B's G x W block (`vector<G*W x i16>`:
  W columns' groups, contiguous);
- the j loop steps by W: C[i, j..j+W) is a vector of W accumulators that gains
  `sum(A[i, k+g] * B[k+g, j+l] for g < G)` per lane per instruction.

| operands (as packed) | accumulator | instruction | G |
|---|---|---|---|
| i16 x i16 (i8/ui8 widened once, as packed) | i32 | vpmaddwd + vpaddd (AVX2, AVX-512BW) | 2 |
| ui8 (A) x i8 (B) | i32 | vpdpbusd (AVX512-VNNI, AVX-VNNI: the target's `int8_dot`) | 4 |
| i8 (A) x ui8 (B) | i32 | vpdpbusd with B's bytes as its unsigned source (`vpdpbusd.swapped`) | 4 |
| bf16 x bf16 | f32 | vdpbf16ps (AVX512-BF16: the target's `bf16_dot`) | 2 |

The integer forms are exact (i32 sums, wrapping as the loops' i32 adds do); vdpbf16ps
sums each pair into the f32 accumulator as the loops would, in another order (f32
reassociation; it flushes denormals). Then `loom-unroll-jam` makes the register tile and
`loom-hoist` keeps C's vectors in registers across k, as for f32's FMAs.

```mlir
// after loom-pack{... group=2 element=i16} of A and B (i8 x i8 -> i32)
affine.for %k = %k_t to %k_t + 256 {
  affine.for %i = ... {
    affine.for %j = %j_t2 to %j_t2 + 16 {
      %a = affine.load %a_pack[..., (%k - %k_t) floordiv 2, %i * 2 - ... + (%k - %k_t) mod 2] : memref<42x128x12xi16>
      %b = affine.load %b_pack[..., (%k - %k_t) floordiv 2, %j * 2 - ... + (%k - %k_t) mod 2] : memref<1x128x32xi16>
      %c = affine.load %c[%i, %j] ...  // + extsi, muli, addi, store
// becomes
affine.for %k = %k_t to %k_t + 256 step 2 {
  affine.for %i = ... {
    affine.for %j = %j_t2 to %j_t2 + 16 step 8 {
      %a = affine.vector_load %a_pack[..., (%k - %k_t) floordiv 2, %i * 2 - ...] : memref<42x128x12xi16>, vector<2xi16>
      %b = affine.vector_load %b_pack[..., (%k - %k_t) floordiv 2, %j * 2 - ...] : memref<1x128x32xi16>, vector<16xi16>
      %c = affine.vector_load %c[%i, %j] : memref<252x256xi32>, vector<8xi32>
      %d = x86vector.dot "vpmaddwd" %c, %a, %b : vector<2xi16>, vector<16xi16> -> vector<8xi32>
      affine.vector_store %d, %c[%i, %j] : memref<252x256xi32>, vector<8xi32>
```

Options: `width` the accumulator's lanes (default: the target's vector width in i32/f32
lanes); `op=TAG` the nests tagged TAG.

One operand may be read in place rather than packed (A of an NHWC direct convolution: its
windows, loom-direct-conv), where each group of G k lies side by side in memory: only its
last, unit-stride subscript moves with k, by 1 per k, through k itself or a `(k + c) mod D`
beside `(k + c) floordiv D` terms (a window row's S*C taps in the plane of its stride
phase), D a multiple of G and the k loop starting groups
(`grouped_reads.contiguous_group`); its group is read at each group's start with the
read's own map (bf16 3x3 C64 56^2 NHWC on vdpbf16ps, znver4, one thread: 137.5 GFLOP/s
through im2col, 212.9 direct).

The statement is the nest's last store; any store before it of the same shape (a sum of
widened products: loom-compensate's column sums of B's panel) is rewritten too. Each
rewrite is a remark naming the instruction. With `op=`, a nest that does not fit is
refused (LoomError, nothing changed): no statement of that shape in its innermost loop,
operands not in groups along one loop (`e floordiv G` beside `e mod G`, the same e, the
loop stepping by 1 from a multiple of G, used by nothing else, in whole groups, or ending
a known number of elements past them in buffers that loom-pack padded with zeros to whole
groups: `loom.zero_padded_groups`, where the loop then runs on to the group's end; for
integers one such buffer is enough, beside another in whole groups, as the product of a
zero is zero), a j loop whose trip count W does not divide, C not unit-stride along j,
element types no instruction takes, or an instruction the target lacks; without `op=`
those nests are skipped with the reason as a remark.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import affine, arith, memref
from xdsl.dialects.builtin import AffineMapAttr, IntegerType, VectorType
from xdsl.ir import Operation

from dialects import arith_ext
from dialects.layout import static_strides
from dialects.x86vector import INSTRUCTIONS, DotOp
from passes.analysis.affine_forms import (
    LinearForm,
    bound_map,
    known_multiple,
    map_forms,
    residue,
    tiles_are_full,
)
from passes.analysis.grouped_reads import (
    GroupedRead,
    NotGrouped,
    contiguous_group,
    group_loop,
    grouped_read,
    moves_with,
)
from passes.analysis.loop_utils import (
    constant_trip_count,
    iv_name,
    nest_tag,
    step_of,
)
from passes.schedule.loom_pack import ZERO_PADDED
from passes.schedule.loop_transforms import rebuild_loop
from passes.schedule.nest_pass import NestPass
from passes.support.diagnostics import LoomError
from passes.support.remarks import remark
from passes.support.target import Target, host


class _Misfit(NotGrouped):
    """Why a nest's statement is not a grouped dot product (a remark, or with `op=` an error)."""


@dataclass
class _Dot:
    k: affine.ForOp
    j: affine.ForOp
    a: GroupedRead  # the group broadcast (j-invariant)
    b: GroupedRead  # W groups along j
    c: affine.LoadOp
    store: affine.StoreOp
    body: list[Operation]
    instruction: str
    width: int
    #: the k loop's upper bound rounded up to whole groups (its tiles end inside one, and
    #: both buffers hold zeros there), None where it runs in whole groups
    upper: list[LinearForm] | None = None


@dataclass(frozen=True)
class LoomDotPass(NestPass[list[_Dot]]):
    name = "loom-dot"

    width: int | None = None
    op: str | None = None

    def option_problems(self) -> list[str | None]:
        if self.width is not None and self.width not in (4, 8, 16):
            return [f"option 'width' is the accumulator's lanes, 4, 8 or 16 (128, 256 or 512 bits), got {self.width}"]
        return []

    def plan(self, nest: affine.ForOp, misfit: str | None) -> list[_Dot] | str:
        target = host()
        width = self.width or target.vector_bits // 32
        try:
            stores = [o for o in nest.walk() if isinstance(o, affine.StoreOp)]
            if not stores:
                raise _Misfit("it stores nothing")
            # the statement (the last store), and before it any other sum of widened
            # products (loom-compensate's column sums of B's panel)
            return [_match(s, width, target) for s in stores[:-1] if _sums_products(s)] + [
                _match(stores[-1], width, target)]
        except NotGrouped as e:
            why = f"nest '{nest_tag(nest) or 'untagged'}' not rewritten: {e}"
            if self.op is not None:
                raise LoomError(f"{self.name}: {why}", nest) from None
            return why

    def rewrite(self, nest: affine.ForOp, plan: list[_Dot]) -> None:
        for dot in plan:
            self._rewrite(nest, dot)

    def _rewrite(self, nest: affine.ForOp, plan: _Dot) -> None:
        info = INSTRUCTIONS[plan.instruction]
        g, w = info.group, plan.width
        store = plan.store
        a = _vector_load(plan.a, VectorType(plan.a.load.result.type, [g]))
        b = _vector_load(plan.b, VectorType(plan.b.load.result.type, [g * w]))
        acc = VectorType(store.value.type, [w])
        c = affine.VectorLoadOp(plan.c.memref, list(plan.c.indices), plan.c.map, acc)
        dot = DotOp(plan.instruction, c.result, a.result, b.result)
        new_store = affine.VectorStoreOp(dot.result, store.memref, list(store.indices), store.map)
        block = store.parent_block()
        assert block is not None
        for new in (a, b, c, dot, new_store):
            new.location = store.location
            block.insert_op_before(new, store)
        for old in reversed(plan.body):
            old.detach()
            old.erase()
        names = iv_name(plan.k), iv_name(plan.j)
        rebuild_loop(plan.j, step=w)
        upper = None if plan.upper is None else bound_map(plan.upper)
        rebuild_loop(plan.k, step=g, upper=None if upper is None else (upper[0].data, upper[1]))
        remark(self.name, nest, f"nest '{nest_tag(nest) or 'untagged'}': {info.described} on "
               f"{w * 32}-bit vectors: loop %{names[0]} steps by {g} (A's group of {g}, broadcast), "
               f"%{names[1]} by {w} (B's {w} groups, {w} accumulators of {store.value.type})"
               + ("" if plan.upper is None else f"; %{names[0]} runs on to its tiles' last whole group, "
                  "whose elements past the end are zeros in both buffers"),
               instruction=plan.instruction, group=g, width=w)


def _vector_load(read: GroupedRead, vtype: VectorType) -> affine.VectorLoadOp:
    return affine.VectorLoadOp(read.load.memref, list(read.load.indices), AffineMapAttr(read.start), vtype)


def _sums_products(store: affine.StoreOp) -> bool:
    """Whether `store` stores `x + y * z` with y and z widened reads (a statement loom-dot
    rewrites, or refuses)."""
    add = store.value.owner
    return isinstance(add, arith.AddiOp | arith.AddfOp) and any(
        isinstance(v.owner, arith.MuliOp | arith.MulfOp)
        and all(isinstance(f.owner, arith_ext.WIDENING) for f in v.owner.operands) for v in add.operands)


def _match(store: affine.StoreOp, width: int, target: Target) -> _Dot:
    j = store.parent_op()
    if not isinstance(j, affine.ForOp) or j.inits:
        raise _Misfit("its statement is not in an innermost loop of its own")
    add = store.value.owner
    if not isinstance(add, arith.AddiOp | arith.AddfOp):
        raise _Misfit("its statement does not add to C")
    c, mul = _pair(add.operands, affine.LoadOp)
    if c is None or not isinstance(mul, arith.MuliOp | arith.MulfOp) or c.memref != store.memref or (
            c.map != store.map or list(c.indices) != list(store.indices)):
        raise _Misfit("its statement is not C[i, j] += x * y")
    casts = [v.owner for v in mul.operands]
    if not all(isinstance(x, arith_ext.WIDENING) and isinstance(x.operands[0].owner, affine.LoadOp) for x in casts):
        raise _Misfit("the product's factors are not widened reads (pack them with loom-pack{group=...})")
    loads = [x.operands[0].owner for x in casts]
    body = [*loads, c, *casts, mul, add, store]
    if len(list(j.body.block.ops)) != len(body) + 1 or any(
            not r.has_one_use() for o in body for r in o.results):
        raise _Misfit("its innermost loop holds more than the statement")
    jv = j.body.block.args[0]
    parsed: list[tuple[GroupedRead, int] | NotGrouped] = []
    for x in loads:
        try:
            parsed.append(grouped_read(x))
        except NotGrouped as why:
            parsed.append(why)
    grouped = [r for r in parsed if not isinstance(r, NotGrouped)]
    if not grouped:
        raise parsed[0]  # type: ignore[misc]
    e, g = grouped[0][0].e, grouped[0][1]
    if any(r.e != e or gg != g for r, gg in grouped):
        raise _Misfit("its operands are not grouped along the same k")
    k, upper = _k_loop(store, e, g, loads)
    kv = k.body.block.args[0]
    if len(grouped) == 1:  # the other read in place, where its groups lie side by side (A's)
        other, why = next((x, r) for x, r in zip(loads, parsed) if isinstance(r, NotGrouped))
        lower = map_forms(k.lowerBoundMap.data, list(k.lowerBoundOperands))[0]
        assert lower is not None  # (_k_loop)
        try:
            grouped.append((contiguous_group(other, kv, g, lower), g))
        except NotGrouped as in_place:
            raise _Misfit(f"{why}, nor read in place in groups of {g} ({in_place})") from None
    along = [r for r, _ in grouped if moves_with(r.start, list(r.load.indices), jv)]
    if len(along) != 1:
        raise _Misfit(f"{'both' if along else 'neither'} of its operands are read along loop %{iv_name(j)}")
    b = along[0]
    a = next(r for r, _ in grouped if r is not b)
    last = map_forms(b.start, list(b.load.indices))[-1]
    if last is None or last.coeff(jv) != g or moves_with(b.start, list(b.load.indices), jv, skip=-1):
        raise _Misfit(f"B's groups are not side by side along loop %{iv_name(j)}")
    if moves_with(b.start, list(b.load.indices), kv, skip=-2) or (a.start is not a.load.map.data and moves_with(
            a.start, list(a.load.indices), kv, skip=-2)):
        raise _Misfit(f"its reads' groups move with loop %{iv_name(k)} other than through e floordiv {g}")
    instruction = _instruction(a.load, b.load, casts[loads.index(a.load)], casts[loads.index(b.load)],
                               store.value.type, g, target)
    _check_j(j, store, width)
    return _Dot(k, j, a, b, c, store, body, instruction, width, upper)


def _pair(values, kind):  # noqa: ANN001, ANN202 - (the operand of `kind`'s op, the other's op)
    x, y = (v.owner for v in values)
    if isinstance(x, kind):
        return x, y
    if isinstance(y, kind):
        return y, x
    return None, None


def _k_loop(store: affine.StoreOp, e: LinearForm, g: int,
            loads: list[affine.LoadOp]) -> tuple[affine.ForOp, list[LinearForm] | None]:
    """The loop the groups are along (`grouped_reads.group_loop`), stepping by 1 from
    where e is a multiple of G; and its upper bound rounded up to whole groups where a
    tile ends inside one (a known number of elements past whole groups) and the reads are
    of buffers that loom-pack padded with zeros there (None where it runs in whole
    groups)."""
    k = group_loop(store, e, loads)
    kv = k.body.block.args[0]
    lower = map_forms(k.lowerBoundMap.data, list(k.lowerBoundOperands))
    if step_of(k) != 1 or len(lower) != 1 or lower[0] is None:
        raise _Misfit(f"loop %{iv_name(k)} does not step by 1 from one lower bound")
    if known_multiple(e.substitute(kv, lower[0])) % g:
        raise _Misfit(f"loop %{iv_name(k)} does not start a group of {g}")
    if tiles_are_full(k, g):
        return k, None
    ends = map_forms(k.upperBoundMap.data, list(k.upperBoundOperands))
    tails = [None if u is None else residue(u - lower[0], g) for u in ends]
    # a product of integers is 0 where one factor is (any bytes in the other buffer,
    # which holds whole groups too: loom-compensate's row of shifts); of floats, only
    # where both are (0 x inf is NaN); a read in place has no zeros past the end
    marked = [isinstance(r.memref.owner, memref.AllocOp) and ZERO_PADDED in r.memref.owner.attributes
              for r in loads]
    allocated = all(isinstance(r.memref.owner, memref.AllocOp) for r in loads)
    padded = all(marked) or (allocated and any(marked) and isinstance(store.value.type, IntegerType))
    if None in tails or not padded:
        raise _Misfit(f"loop %{iv_name(k)} does not run in whole groups of {g}, nor to a known place in a group "
                      "of buffers padded with zeros to whole groups")
    return k, [u + (g - r if r else 0) for u, r in zip(ends, tails)]  # type: ignore[operator]


def _instruction(a: affine.LoadOp, b: affine.LoadOp, a_cast: Operation, b_cast: Operation,
                 acc: object, g: int, target: Target) -> str:
    types = (str(a.result.type), str(b.result.type), str(acc))
    found = next((i for i in INSTRUCTIONS.values() if (i.a, i.b, i.acc) == types), None)
    if found is None or found.group != g:
        raise _Misfit(f"no dot-product instruction takes {types[0]} x {types[1]} -> {types[2]} in groups of {g}")
    unsigned, signed = (b_cast, a_cast) if found.swapped else (a_cast, b_cast)
    if found.name == "vpdpbusd" and not (isinstance(unsigned, arith_ext.ExtUIOp) and isinstance(signed, arith_ext.ExtSIOp)):
        first, second = ("B", "A") if found.swapped else ("A", "B")
        raise _Misfit(f"vpdpbusd reads {first}'s bytes unsigned and {second}'s signed, not as these reads widen them")
    if found.name == "vpmaddwd" and not all(isinstance(x, arith_ext.ExtSIOp) for x in (a_cast, b_cast)):
        raise _Misfit("vpmaddwd reads signed i16, not as these reads widen them")
    has = {"vpmaddwd": True, "vpdpbusd": target.int8_dot, "vdpbf16ps": target.bf16_dot}[found.name]
    if not has:
        flag = "int8_dot" if found.name == "vpdpbusd" else "bf16_dot"
        raise _Misfit(f"{found.name} is not on target {target.cpu} ({flag}=0)")
    return found.key


def _check_j(j: affine.ForOp, store: affine.StoreOp, width: int) -> None:
    trips = constant_trip_count(j)
    if step_of(j) != 1 or trips is None or trips % width:
        raise _Misfit(f"loop %{iv_name(j)} does not run a constant multiple of {width} iterations")
    jv = j.body.block.args[0]
    last = map_forms(store.map.data, list(store.indices))[-1]
    layout = static_strides(store.memref.type)
    if last is None or last.coeff(jv) != 1 or moves_with(store.map.data, list(store.indices), jv, skip=-1) or \
            layout is None or layout[0][-1] != 1:
        raise _Misfit(f"C is not read along loop %{iv_name(j)} with unit stride")

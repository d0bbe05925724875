"""loom-fuse-pack{prefetch=1 op=...}: the copy that loom-pack puts before a loop, done by
that loop's first iteration while it computes, and the next copy's source prefetched by
the iterations after it.

A packed panel is read by every iteration of the loop after its copy (the register
tiles' rows, i_r), at the same elements: the first iteration can read the operand itself
and store each value into the buffer as it goes, so that the operand streams from memory
into the fmas instead of into a copy that the fmas wait for. The iterations after it read
the buffer, and prefetch, at the same point of their body, what the copy of the next
iteration of the copy's own loop (the panel loop, j_t) reads: the operand's rows arrive
in the caches a panel ahead, so the next first iteration finds them there.

```mlir
affine.for %j_t = 0 to 256 step 48 {
  affine.for %k_cp = 0 to 64 {                          // the copy (loom-pack)
    affine.for %j_cp = 0 to 48 step 16 {
      %v = affine.vector_load %b[%k_cp, %j_t + %j_cp] : memref<64x256xf32>, vector<16xf32>
      affine.vector_store %v, %b_pack[0, %k_cp, %j_cp] : memref<1x64x48xf32>, vector<16xf32>
    }
  }
  affine.for %i_r = 0 to 32 step 8 {                    // its reader
    ... affine.for %k = 0 to 64 ... {
      %p = affine.vector_load %b_pack[0, %k, 0] : memref<1x64x48xf32>, vector<16xf32>
      ...
// becomes
affine.for %j_t = 0 to 256 step 48 {
  affine.for %i_r = 0 to 8 step 8 {                     // the first iteration
    ... affine.for %k = 0 to 64 ... {
      %p = affine.vector_load %b[%k, %j_t] : memref<64x256xf32>, vector<16xf32>
      affine.vector_store %p, %b_pack[0, %k, 0] : memref<1x64x48xf32>, vector<16xf32>
      ...
  affine.for %i_r = 8 to 32 step 8 {                    // the others
    ... affine.for %k = 0 to 64 ... {
      loom.prefetch %b[%k, %j_t + 48], read, locality<3>, data : memref<64x256xf32>
      %p = affine.vector_load %b_pack[0, %k, 0] : memref<1x64x48xf32>, vector<16xf32>
      ...
```

Measured with the panel schedule of loom-default (znver4, one thread, 128x768 @ 768x3072,
B a panel of 768x48 at a time): the copy before the reader 6.59 ms, the next panel
prefetched 6.10, fused and prefetched 5.82 (numpy 6.99).

A copy nest is a nest whose only memory ops are loads of one memref (the source) whose
values are stored, each at a subscript of its own loop's iv (plus a constant), into a
buffer that `memref.alloc` made. Its reader is the first loop after it, in the same
block, that reads the buffer. Each read of the buffer in the reader's first iteration,
buffer[e], becomes a read of the source where the copy read what it stored at e (the
copy's load with its ivs solved from e), followed by the store of that value to buffer[e]
(reads at one address in one block share the load and the store). This is the copy's
work exactly when every iteration of the reader reads the same elements (its iv reaches
no read of the buffer, no loop bound and no condition around one) and the reader runs at
least once; the elements it reads are those the copy wrote (loom-pack: the compute loops
never read the panels' padding), and nothing between the copy and the reader writes
memory or touches the buffer, and nothing but the copy and the reader uses the buffer.

A copy into groups along k (loom-pack{group=G}, a dot-product instruction's layout: its
stores at `k floordiv G`, `j * G + k mod G`) stays where it is: each vector its reader
loads interleaves G rows of the source, which no read of the source gives. It prefetches
instead, before the loops that walk a row of each load, every cache line that the copy
`GROUPED_AHEAD` iterations of its loop ahead reads there (B's rows a page apart leave the
hardware prefetchers nothing to follow: u8 x s8 128x3072x768 on vpdpbusd, after a sweep
of the caches, 357 -> 376 GOP/s on one thread, znver4).

Left alone, with a remark saying why: a copy whose reader does not meet those conditions,
a reader with iter_args or a lower bound of several terms, reads of the buffer that are
not affine loads (masked loads of a remainder), a vector read of a buffer the copy wrote
element by element. `prefetch=0`: no prefetches. Refused (LoomError): `prefetch` other than
0 or 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, memref
from xdsl.dialects.builtin import AffineMapAttr, ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.passes import ModulePass

from passes.support.remarks import remark
from dialects.loom import PrefetchOp
from passes.analysis.affine_forms import map_forms
from passes.analysis.loop_utils import (
    AFFINE_LOADS,
    AFFINE_STORES,
    LOADS,
    STORES,
    constant_trip_count,
    defined_outside,
    describe_access,
    is_pure,
    iv_name,
    loops_of_nest,
    provably_nonempty,
    raise_problems,
    select_nests,
    simplify,
    step_of,
    unify_operands,
    used_positions,
    value_name,
)
from passes.schedule.loom_prefetch import LoomPrefetchPass
from passes.schedule.loop_transforms import rebuild_loop

_STORE_OF = {affine.LoadOp: affine.StoreOp, affine.VectorLoadOp: affine.VectorStoreOp}
_Address = tuple[Block, type, AffineMap, tuple[SSAValue, ...]]


@dataclass
class _Copy:
    """A copy nest: `buffer[store map] = source[load map]`, over the copy's ivs."""

    nest: affine.ForOp
    source: SSAValue
    buffer: SSAValue
    load: affine.LoadOp | affine.VectorLoadOp
    store: affine.StoreOp | affine.VectorStoreOp
    #: buffer subscript d -> (the copy iv it walks, its offset), or (None, 0) for one fixed
    #: in the copy (a constant, loom-pack's private slot), which the reads must share;
    #: None where a subscript is no copy iv plus a constant (loom-pack's groups: `k floordiv
    #: G`, `j * G + k mod G`), through which no read is traced back
    solved: list[tuple[SSAValue | None, int]] | None


@dataclass(frozen=True)
class LoomFusePackPass(ModulePass):
    name = "loom-fuse-pack"

    prefetch: int = 1
    op: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        raise_problems(self.name, [
            f"option 'prefetch' is 1 (prefetch the next copy's source) or 0, got {self.prefetch}"
            if self.prefetch not in (0, 1) else None,
        ])
        for nest in select_nests(op, self.op, self.name):
            copies: list[_Copy] = []
            for loop in loops_of_nest(nest):  # outermost first: a copy nest's own loops are not copies
                if not any(c.nest.is_ancestor(loop) for c in copies) and (c := _copy_nest(loop)) is not None:
                    copies.append(c)
            for copy in copies:
                if copy.solved is None:
                    self._in_groups(copy)
                    continue
                why = self._fuse(copy)
                if why:
                    remark(self.name, copy.nest, f"copy of {value_name(copy.source)} into "
                           f"{value_name(copy.buffer)} left as it is: {why}", missed=True)

    def _fuse(self, copy: _Copy) -> str | None:
        """Fuse `copy` into its reader's first iteration; the reason it cannot, or None."""
        reader, why = _reader(copy)
        if reader is None:
            return why
        if reader.results:
            return f"its reader %{iv_name(reader)} carries values (iter_args)"
        if len(reader.lowerBoundMap.data.results) != 1:
            return f"its reader %{iv_name(reader)} starts at the largest of several bounds"
        if not provably_nonempty(reader):
            return f"its reader %{iv_name(reader)} may run no iteration"
        reads = [o for o in reader.walk() if copy.buffer in o.operands and o is not reader]
        if bad := next((o for o in reads if not isinstance(o, AFFINE_LOADS)), None):
            return f"its reader %{iv_name(reader)} uses it other than by affine loads ({bad.name})"
        varying = _depends_on(reader)
        for read in reads:
            if bad := _varies(read, reader, varying):
                return f"the iterations of %{iv_name(reader)} read different elements of it ({bad})"
            if not _fixed_subscripts_match(copy, read):
                return f"its reader reads it at {describe_access(read)}, outside the part the copy writes"
            if isinstance(read, affine.VectorLoadOp) and not isinstance(copy.load, affine.VectorLoadOp):
                return "its reader reads vectors of it, the copy copies element by element"
            if isinstance(read, affine.VectorLoadOp) and read.result.type != copy.load.result.type:
                return f"its reader reads {read.result.type}, the copy copies {copy.load.result.type}"

        level = _next_copy_loop(copy.nest)
        trips = constant_trip_count(reader)
        first, rest = _peel_first(reader)
        if trips == 1:
            rest.parent_block().erase_op(rest)
            rest = None
        sources = self._read_source(copy, first)
        copy.nest.parent_block().erase_op(copy.nest)
        prefetched = 0
        if self.prefetch and rest is not None and isinstance(level, affine.ForOp):
            prefetched = self._prefetch_next(copy, rest, level)
        then = (f"; the other iterations read {value_name(copy.buffer)} and prefetch what the next iteration of "
                f"%{iv_name(level)} copies ({prefetched} prefetch{'es' * (prefetched != 1)})" if prefetched else "")
        remark(self.name, first, f"copy of {value_name(copy.source)} into {value_name(copy.buffer)} fused into "
               f"the first iteration of %{iv_name(first)}: it reads {value_name(copy.source)} and stores "
               f"{sources} value{'s' * (sources != 1)} into {value_name(copy.buffer)} per iteration of its "
               f"innermost loop as it computes{then}")
        return None

    def _in_groups(self, copy: _Copy) -> None:
        """A copy into groups (`_Copy.solved` None) stays where it is: each vector its reader
        loads interleaves G rows of the source. With `prefetch`, it prefetches what the copy
        `GROUPED_AHEAD` iterations of its loop ahead reads (`_prefetch_ahead`)."""
        level = _next_copy_loop(copy.nest)
        if not isinstance(level, affine.ForOp):
            return  # (a copy made once: nothing comes after it to prefetch)
        count = _prefetch_ahead(copy, level, GROUPED_AHEAD) if self.prefetch else 0
        ahead = (f"; it prefetches what the copy {GROUPED_AHEAD} iterations of %{iv_name(level)} ahead reads "
                 f"({count} prefetch{'es' * (count != 1)})" if count else "")
        remark(self.name, copy.nest, f"copy of {value_name(copy.source)} into {value_name(copy.buffer)} left as it "
               f"is: it lays {value_name(copy.buffer)} out in groups (each vector its reader loads interleaves "
               f"rows of {value_name(copy.source)}){ahead}", missed=not count)

    @staticmethod
    def _read_source(copy: _Copy, first: affine.ForOp) -> int:
        """In `first`, each read of the buffer becomes a read of the source and a store of
        the value into the buffer, one per address and block. Returns how many."""
        done: dict[_Address, SSAValue] = {}
        for read in _loads_of(first, copy.buffer):
            key = _address(read)
            if key not in done:
                m, operands = _source_map(copy, read)
                # a read as wide as the copy's (checked), or one element of a vector copy
                load = type(read)(copy.source, operands, AffineMapAttr(m), read.result.type)
                store = _STORE_OF[type(read)](load.result, copy.buffer, list(read.indices), read.map)
                for new in (load, store):
                    new.location = read.location
                    read.parent_block().insert_op_before(new, read)
                done[key] = load.result
            read.result.replace_all_uses_with(done[key])
            read.parent_block().erase_op(read)
        return len({k[2:] for k in done})

    @staticmethod
    def _prefetch_next(copy: _Copy, rest: affine.ForOp, level: affine.ForOp) -> int:
        """Before each first read of an address of the buffer in `rest`, a prefetch of the
        source where the copy of the next iteration of `level` reads for that address."""
        iv, step = level.body.block.args[0], step_of(level)
        seen: set[_Address] = set()
        computed: dict = {}
        count = 0
        for read in _loads_of(rest, copy.buffer):
            key = _address(read)
            if key in seen:
                continue
            seen.add(key)
            if not any(v is iv for v in copy.load.indices):
                continue
            m, operands = _source_map(copy, read, (iv, step))
            subscripts = [LoomPrefetchPass._subscript(e, m, tuple(operands), computed, read) for e in m.results]
            prefetch = PrefetchOp(copy.source, subscripts, write=False, locality=3)
            prefetch.location = read.location
            read.parent_block().insert_op_before(prefetch, read)
            count += 1
        return count


#: how many copies ahead a copy into groups prefetches its source (`_prefetch_ahead`):
#: u8 x s8 128x3072x768 on vpdpbusd (B's 48 panels of 768x64 bytes, each row a line, a
#: page apart), znver4, one thread, GOP/s after a 64 MiB sweep of the caches (warm):
#: none 357 (422), 1 copy ahead 360 (423), 2: 376 (426), 3: 372, 4: 371
GROUPED_AHEAD = 2
#: bytes of a cache line (x86-64's)
CACHE_LINE = 64


def _prefetch_ahead(copy: _Copy, level: affine.ForOp, ahead: int) -> int:
    """In the copy, a prefetch of each cache line its loads read `ahead` iterations of
    `level` later: for each load, placed before its innermost loops that move only its
    last (contiguous) subscript, one per line they span. Returns how many (per iteration
    of the loop they are in)."""
    iv, step = level.body.block.args[0], step_of(level)
    element = copy.source.type.element_type
    per_line = max(1, CACHE_LINE // (getattr(element, "bitwidth", 32) // 8))
    count = 0
    done: set[tuple] = set()
    computed: dict = {}
    for load in [o for o in copy.nest.walk() if isinstance(o, AFFINE_LOADS) and o.memref is copy.source]:
        if not any(v is iv for v in load.indices):
            continue  # (the next copies read the same elements)
        m = load.map.data
        last = map_forms(m, load.indices)[-1]
        # the loops around the load that move its last subscript alone, by constant bounds
        inner: list[affine.ForOp] = []
        loop = load.parent_op()
        while isinstance(loop, affine.ForOp) and copy.nest.is_ancestor(loop) and loop is not copy.nest:
            v = loop.body.block.args[0]
            elsewhere = any(load.indices[p] is v for p in used_positions(m.results[:-1], m.num_dims))
            if elsewhere or last is None or last.coeffs.get(v, 0) < 0 or constant_trip_count(loop) is None:
                break
            if len(loop.lowerBoundMap.data.results) != 1 or loop.lowerBoundOperands:
                break
            inner.append(loop)
            loop = loop.parent_op()
        if not inner:
            continue
        outer = inner[-1]
        ivs = {lp.body.block.args[0]: lp for lp in inner}
        if any(v not in ivs and not defined_outside(v, outer) for v in load.indices):
            continue
        # the elements the inner loops span along the last subscript, from their lower bounds
        span = 1 + sum(last.coeffs.get(v, 0) * (constant_trip_count(lp) - 1) * step_of(lp) for v, lp in ivs.items())
        if isinstance(load, affine.VectorLoadOp):
            span += load.result.type.get_shape()[-1] - 1
        # over the load's operands (dims and symbols alike) but the inner ivs (at their
        # lower bounds), `level`'s iv `ahead` steps on
        operands: list[SSAValue] = []
        replaced: list[AffineExpr] = []
        for v in load.indices:
            if v in ivs:
                replaced.append(AffineExpr.constant(ivs[v].lowerBoundMap.data.results[0].value))
                continue
            d = AffineExpr.dimension(len(operands))
            operands.append(v)
            replaced.append(d + ahead * step if v is iv else d)
        dims, syms = replaced[: m.num_dims], replaced[m.num_dims:]
        base = [e.replace_dims_and_symbols(dims, syms) for e in m.results]
        for line in range(-(-span // per_line)):
            results = tuple(simplify(e, len(operands)) for e in (*base[:-1], base[-1] + line * per_line))
            key = (results, tuple(operands), outer)
            if key in done:
                continue
            done.add(key)
            nm = AffineMap(len(operands), 0, results)
            subscripts = [LoomPrefetchPass._subscript(e, nm, tuple(operands), computed, outer) for e in results]
            prefetch = PrefetchOp(copy.source, subscripts, write=False, locality=3)
            prefetch.location = load.location
            outer.parent_block().insert_op_before(prefetch, outer)
            count += 1
    return count


def _next_copy_loop(nest: affine.ForOp) -> affine.ForOp | None:
    """The loop whose next iteration runs the copy again: the innermost loop around it
    with more than one iteration (tiles of a single iteration, k_t when KC = K, skipped)."""
    loop = nest.parent_op()
    while isinstance(loop, affine.ForOp) and constant_trip_count(loop) == 1:
        loop = loop.parent_op()
    return loop if isinstance(loop, affine.ForOp) else None


def _loads_of(loop: affine.ForOp, buffer: SSAValue) -> list[affine.LoadOp | affine.VectorLoadOp]:
    """The affine loads of `buffer` inside `loop`, in program order (a list: the callers
    rewrite them as they go)."""
    return [o for o in loop.walk() if isinstance(o, AFFINE_LOADS) and o.memref is buffer]


def _address(op: affine.LoadOp | affine.VectorLoadOp) -> _Address:
    return op.parent_block(), type(op), op.map.data, tuple(op.indices)


def _copy_nest(loop: affine.ForOp) -> _Copy | None:
    """`loop` as a copy nest (see the module's doc), or None."""
    if not isinstance(loop.parent_op(), affine.ForOp) or loop.results:
        return None
    loops: list[SSAValue] = []
    loads: list[Operation] = []
    stores: list[Operation] = []
    for o in loop.walk():
        if isinstance(o, affine.ForOp):
            loops.append(o.body.block.args[0])
        elif isinstance(o, AFFINE_LOADS):
            loads.append(o)
        elif isinstance(o, AFFINE_STORES):
            stores.append(o)
        elif not isinstance(o, affine.YieldOp | affine.ApplyOp | affine.MinOp):
            return None
    if not loads or len(loads) != len(stores) or any(s.value.owner not in loads for s in stores):
        return None
    buffer, source = stores[0].memref, loads[0].memref
    if (not isinstance(buffer.owner, memref.AllocOp) or buffer is source
            or any(s.memref is not buffer for s in stores) or any(o.memref is not source for o in loads)):
        return None
    load, store = stores[0].value.owner, stores[0]
    inner = set(loops)
    if any(v not in inner and not defined_outside(v, loop) for v in load.indices):
        return None  # the load reads a value computed in the copy (not a plain access)
    return _Copy(loop, source, buffer, load, store, _solve(store, inner))


def _solve(store: affine.StoreOp | affine.VectorStoreOp, inner: set[SSAValue]) -> list[tuple[SSAValue | None, int]] | None:
    """`_Copy.solved` of a copy's store, inside the copy's ivs `inner`."""
    solved: list[tuple[SSAValue | None, int]] = []
    sm = store.map.data
    for e, form in zip(sm.results, map_forms(sm, store.indices)):
        if not any(store.indices[p] in inner for p in used_positions((e,), sm.num_dims)):
            solved.append((None, 0))  # fixed in the copy: a constant, a private slot
            continue
        # a copy iv plus a constant
        if form is None or list(form.coeffs.values()) != [1] or (iv := next(iter(form.coeffs))) not in inner:
            return None
        solved.append((iv, form.const))
    walked_ivs = [iv for iv, _ in solved if iv is not None]
    load = store.value.owner
    assert isinstance(load, AFFINE_LOADS)
    if len(set(walked_ivs)) != len(walked_ivs) or any(v in inner and v not in walked_ivs for v in load.indices):
        return None
    return solved


def _fixed_subscripts_match(copy: _Copy, read: affine.LoadOp | affine.VectorLoadOp) -> bool:
    """Whether `read` has the copy's subscript wherever the copy's is fixed (the same
    expression of the same values)."""
    fixed = [d for d, (iv, _) in enumerate(copy.solved) if iv is None]
    values, (mine, theirs) = unify_operands((read.map.data, read.indices), (copy.store.map.data, copy.store.indices))
    return all(simplify(mine[d] - theirs[d], len(values)) == AffineExpr.constant(0) for d in fixed)


def _reader(copy: _Copy) -> tuple[affine.ForOp | None, str]:
    """The loop after the copy that reads its buffer, or None and why not."""
    op = copy.nest.next_op
    while op is not None:
        touches = [o for o in op.walk() if copy.buffer in o.operands]
        if touches:
            if not isinstance(op, affine.ForOp):
                return None, f"{op.name} uses it after the copy, before any loop reads it"
            # the copy and the reader are its only users (and its dealloc): elements the
            # copy wrote that the reader does not read would not be written any more
            for use in copy.buffer.uses:
                user = use.operation
                if not (copy.nest.is_ancestor(user) or op.is_ancestor(user) or isinstance(user, memref.DeallocOp)):
                    return None, f"{user.name} uses it outside the copy and its reader %{iv_name(op)}"
            return op, ""
        if any(isinstance(o, STORES) or (o.regions == [] and not _reads_only(o)) for o in op.walk()):
            return None, f"{op.name} between the copy and its reader may write memory"
        op = op.next_op
    return None, "no loop after it reads it"


def _reads_only(op: Operation) -> bool:
    return is_pure(op) or isinstance(op, LOADS)


def _depends_on(loop: affine.ForOp) -> set[SSAValue]:
    """The values in `loop`'s body that its iv may reach: results of ops that take one
    of them (and the block arguments of their regions), the iv of a loop whose bounds
    do, the iter_args whose inits do, every loop's results."""
    varying: set[SSAValue] = {loop.body.block.args[0]}
    for o in loop.body.block.walk():
        if isinstance(o, affine.ForOp):
            iv, *carried = o.body.block.args
            if any(v in varying for v in (*o.lowerBoundOperands, *o.upperBoundOperands)):
                varying.add(iv)
            varying.update(arg for arg, init in zip(carried, o.inits) if init in varying)
            varying.update(o.results)  # what it yields may depend on anything inside: assume so
        elif any(v in varying for v in o.operands):
            varying.update(o.results)
            for region in o.regions:
                for block in region.blocks:
                    varying.update(block.args)
    return varying


def _varies(read: Operation, reader: affine.ForOp, varying: set[SSAValue]) -> str | None:
    """What makes `read` touch other elements in other iterations of `reader`, or None."""
    if any(v in varying for v in read.indices):
        return f"its subscripts at {read.name} depend on %{iv_name(reader)}"
    parent = read.parent_op()
    while parent is not None and parent is not reader:
        bounds = ((*parent.lowerBoundOperands, *parent.upperBoundOperands) if isinstance(parent, affine.ForOp)
                  else parent.operands if isinstance(parent, affine.IfOp) else ())
        if any(v in varying for v in bounds):
            return f"a loop or condition around a read depends on %{iv_name(reader)}"
        parent = parent.parent_op()
    return None


def _source_map(copy: _Copy, read: affine.LoadOp | affine.VectorLoadOp,
                ahead: tuple[SSAValue, int] | None = None) -> tuple[AffineMap, list[SSAValue]]:
    """Where the copy read the value it stored at the read's address: the copy's load map
    with each copy iv solved from the read's subscripts, over the read's operands and then
    the load's other operands (all as dims). `ahead` = (iv, step): where the copy run with
    `iv + step` reads the value it stores there (the read's subscripts, relative to the
    tile, stay as they are)."""
    rm = read.map.data
    operands = list(read.indices)
    as_dims = [AffineExpr.dimension(i) for i in range(rm.num_dims)]
    as_syms = [AffineExpr.dimension(rm.num_dims + i) for i in range(rm.num_symbols)]
    subscripts = [e.replace_dims_and_symbols(as_dims, as_syms) for e in rm.results]
    ivs = {iv: subscripts[d] - offset for d, (iv, offset) in enumerate(copy.solved) if iv is not None}
    lm = copy.load.map.data
    replaced: list[AffineExpr] = []
    for value in copy.load.indices:
        if value in ivs:
            replaced.append(ivs[value])
            continue
        if not any(v is value for v in operands):
            operands.append(value)
        dim = AffineExpr.dimension(next(p for p, v in enumerate(operands) if v is value))
        replaced.append(dim + ahead[1] if ahead is not None and value is ahead[0] else dim)
    n = len(operands)
    dims, syms = replaced[: lm.num_dims], replaced[lm.num_dims:]
    results = tuple(simplify(e.replace_dims_and_symbols(dims, syms), n, 0) for e in lm.results)
    return AffineMap(n, 0, results), operands


def _peel_first(loop: affine.ForOp) -> tuple[affine.ForOp, affine.ForOp]:
    """A copy of `loop` over its first iteration, put before it, and `loop` rebuilt to
    start one step later."""
    lb, lb_ops = loop.lowerBoundMap.data, list(loop.lowerBoundOperands)
    step = step_of(loop)
    first = loop.clone()
    loop.parent_block().insert_op_before(first, loop)
    after = AffineMap(lb.num_dims, lb.num_symbols, (lb.results[0] + step,))
    rebuild_loop(first, upper=(after, lb_ops))
    peeled = loop.prev_op
    assert isinstance(peeled, affine.ForOp)
    return peeled, rebuild_loop(loop, lower=(after, lb_ops))


"""loom-outline{min-nests=16}: give each loop nest of a long function a function of its own,
one function per distinct nest.

Compile time must grow linearly with a kernel's op count, and one function holding
thousands of loop nests does not: LLVM's loop passes (loop-vectorize, indvars,
loop-rotate, LSR) cost time per loop in proportion to the size of the function around it
(a chain of 400 elementwise ops in one function: 4.3 s in O3; 800: 22 s), and so do
xDSL's verifier and the lowering to cf (block counts per region). With every nest in a
function of its own, each of those costs is bounded by the nest's size.

In a function with more than `min-nests` top-level loop nests (`affine.for`,
`affine.parallel`), each nest moves into a private function that takes what the nest
reads from outside (the buffers, any other value) as arguments, and a `func.call`
takes its place. Nests that are the same but for the buffers they work on (the same ops,
types, attributes and shapes: the layers of a network, a chain of adds) share one
function, compiled once. The functions are `no_inline`: LLVM would otherwise inline a
function called once right back. Later passes see the nests in their functions:
schedule passes select them by tag as before, and schedule each distinct nest once.
(The arguments are named after the first call's values.)

A matmul or conv2d nest (or a Winograd output transform's nests) moves with its zero fill
and the elementwise nests right after it (`loom-fuse-epilogue`'s EPILOGUES, at most MAX_STEPS), into one function, and so do the
buffers only they use (allocated and freed inside it): the schedule then fuses the
epilogue into the nest there, as it does in a short function, and drops the buffers. A
buffer the group writes for later nests is allocated before the call; one it reads last
is freed after it. (ResNet-18 through the torch backend, 81 nests: its bias adds, relus
and residual adds had each run as a nest of its own, 3% of a batch-8 call.)

Functions with `min-nests` nests or fewer are left as they are: there, one function is
cheap, and LLVM sees the whole kernel. `compile()` runs the pass after
convert-loom-to-affine (passes/pipelines.py), before any schedule.

```mlir
func.func @chain(%x0: memref<64xf32>, %b: memref<64xf32>, %x2: memref<64xf32>) {
  %x1 = memref.alloc() : memref<64xf32>
  affine.for %i = 0 to 64 { ... %x0 ... %b ... %x1 ... } {loom.tag = "add"}
  affine.for %i = 0 to 64 { ... %x1 ... %b ... %x2 ... } {loom.tag = "add"}
  ...
}
// becomes (loom-outline{min-nests=1})
func.func @chain(%x0: memref<64xf32>, %b: memref<64xf32>, %x2: memref<64xf32>) {
  %x1 = memref.alloc() : memref<64xf32>
  func.call @chain_nest0(%x0, %b, %x1) : (memref<64xf32>, memref<64xf32>, memref<64xf32>) -> ()
  func.call @chain_nest0(%x1, %b, %x2) : (memref<64xf32>, memref<64xf32>, memref<64xf32>) -> ()
  ...
}
func.func private @chain_nest0(%x0: memref<64xf32>, %b: memref<64xf32>, %x1: memref<64xf32>) attributes {no_inline} {
  affine.for %i = 0 to 64 { ... %x0 ... %b ... %x1 ... } {loom.tag = "add"}
  func.return
}
```

Aliasing: a memref argument of the new function is always a whole buffer (a function
argument or an allocation: views of it are rebuilt inside, with the constants the nest
uses), and distinct arguments are distinct buffers, so the `noalias` that
loom-convert-to-llvm gives every memref argument holds, as it does for the caller's.
A nest that reads a buffer made some other way (returned by a call, say), or that has
results, stays where it is.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, func, memref
from xdsl.dialects.builtin import ModuleOp, UnitAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from passes.analysis.last_write import INITS
from passes.analysis.live_ins import OutlineInputs, outline_inputs, use_inside
from passes.analysis.loop_utils import is_pure, nest_tag
from passes.schedule.loom_fuse_epilogue import EPILOGUES, MAX_STEPS, PRODUCERS
from passes.support.diagnostics import LoomError
from passes.support.remarks import remark

PASS = "loom-outline"
_NESTS = (affine.ForOp, affine.ParallelOp)


def _structure(block: Block) -> Hashable:
    """A key equal for two blocks exactly when they hold the same ops (names, operands,
    types, properties, attributes, regions; not locations or SSA names)."""
    numbers: dict[SSAValue, int] = {}

    def block_key(b: Block) -> tuple:
        for arg in b.args:
            numbers[arg] = len(numbers)
        return (tuple(a.type for a in b.args), tuple(op_key(op) for op in b.ops))

    def op_key(op: Operation) -> tuple:
        operands = tuple(numbers.get(v, -1) for v in op.operands)
        regions = tuple(tuple(block_key(b) for b in r.blocks) for r in op.regions)
        for result in op.results:
            numbers[result] = len(numbers)
        return (op.name, operands, tuple(r.type for r in op.results),
                tuple(sorted(op.properties.items())), tuple(sorted(op.attributes.items())),
                len(op.successors), regions)

    return block_key(block)


def _body(ops: list[Operation], found: OutlineInputs) -> Block:
    """The new function's body: the rebuilt ops, then `ops` (moved, reading the block's
    arguments and the rebuilt values), then the return."""
    body = Block(arg_types=[v.type for v in found.arguments])
    inside = found.rebuild(body)
    for op in ops:
        op.detach()
        body.add_op(op)
        use_inside(op, inside)
    body.add_op(func.ReturnOp())
    return body


def _groups(nests: list[Operation]) -> list[list[Operation]]:
    """The nests in the groups that move together: a matmul, conv2d or Winograd output
    transform (with its zero fill before it, and all its nests where it has several) and
    the elementwise nests right after it that loom-fuse-epilogue may fuse into it (at most
    MAX_STEPS); any other nest alone."""
    groups: list[list[Operation]] = []
    i = 0
    while i < len(nests):
        start = i
        if nest_tag(nests[i]) in INITS and i + 1 < len(nests) and nest_tag(nests[i + 1]) in PRODUCERS:
            i += 1
        if nest_tag(nests[i]) in PRODUCERS:
            while i + 1 < len(nests) and nest_tag(nests[i + 1]) == nest_tag(nests[i]):
                i += 1  # an op lowered to a nest per run (winograd_output's runs of tiles)
            producer = i
            while i + 1 < len(nests) and nest_tag(nests[i + 1]) in EPILOGUES and i - producer < MAX_STEPS:
                i += 1
        groups.append(nests[start:i + 1])
        i += 1
    return [g for group in groups for g in _adjacent(group)]


def _adjacent(group: list[Operation]) -> list[list[Operation]]:
    """The group, or its nests one by one where anything but allocations, deallocations
    and pure ops (views, constants) lies between them."""
    op = group[0].next_op
    for nest in group[1:]:
        while op is not nest:
            if op is None or not (isinstance(op, memref.AllocOp | memref.DeallocOp) or is_pure(op)):
                return [[n] for n in group]
            op = op.next_op
        op = op.next_op
    return [group]


def _span(group: list[Operation]) -> list[Operation]:
    """The function's ops from the group's first nest to its last."""
    ops, op = [], group[0]
    while True:
        ops.append(op)
        if op is group[-1]:
            return ops
        op = op.next_op


def _only_inside(value: SSAValue, group: set[Operation]) -> bool:
    """Whether every use of the buffer (through the views made of it) is in the group's
    nests or a deallocation."""
    for use in value.uses:
        user = use.operation
        top = user
        while top.parent_op() is not None and not isinstance(top.parent_op(), func.FuncOp):
            top = top.parent_op()
        if top in group or isinstance(user, memref.DeallocOp):
            continue
        if is_pure(user) and user.parent_op() is not None and isinstance(user.parent_op(), func.FuncOp) \
                and all(_only_inside(r, group) for r in user.results):
            continue
        return False
    return True


@dataclass
class _Outliner:
    """Outlines the nests of one function, one new function per distinct nest."""

    fn: func.FuncOp
    module: ModuleOp
    taken: set[str]
    shared: dict[Hashable, func.FuncOp]
    anchor: Operation  # the new functions follow the function, in order

    def outline(self, group: list[Operation]) -> OutlineInputs | None:
        """Replace the group's nests by a call (the buffers only they use, allocated and
        freed inside it); None (and a remark) when they must stay."""
        entry = self.fn.body.blocks[0]
        nests = set(group)
        span = _span(group)
        found = outline_inputs(group, entry)
        internal = [] if found is None else [
            v.owner for v in found.arguments if isinstance(v.owner, memref.AllocOp) and _only_inside(v, nests)]
        frees = [u.operation for a in internal for u in a.memref.uses if isinstance(u.operation, memref.DeallocOp)]
        moved = [*internal, *group, *frees]
        if internal:
            found = outline_inputs(moved, entry)
        if found is None:
            remark(PASS, group[0], "nest left in its function: it reads a buffer that is neither an "
                   "argument nor an allocation of the function (it might alias another)", missed=True)
            return None
        location, after = group[0].location, group[-1].next_op
        while after in frees:  # (moved inside)
            after = after.next_op
        assert after is not None  # the function's terminator, at least
        # the buffers the group writes for later nests are allocated before it, those it
        # reads last freed after it
        for alloc in (op for op in span if isinstance(op, memref.AllocOp) and op not in internal):
            alloc.detach()
            entry.insert_op_before(alloc, group[0])
        kept = [op for op in span if isinstance(op, memref.DeallocOp) and op not in frees]
        body = _body(moved, found)
        callee = self._function_for(body, found)
        call = func.CallOp(callee.sym_name.data, found.arguments, [])
        call.location = location
        entry.insert_op_before(call, after)
        for free in kept:
            free.detach()
            entry.insert_op_before(free, after)
        return found

    def _function_for(self, body: Block, found: OutlineInputs) -> func.FuncOp:
        """The function with this body: an earlier one with the same body, or a new one."""
        key = _structure(body)
        callee = self.shared.get(key)
        if callee is not None:
            body.erase()
            return callee
        name = _fresh_name(f"{self.fn.sym_name.data}_nest{len(self.shared)}", self.taken)
        callee = func.FuncOp(name, ([v.type for v in found.arguments], []), Region(body), "private")
        callee.attributes["no_inline"] = UnitAttr()
        self.module.body.block.insert_op_after(callee, self.anchor)
        self.anchor = self.shared[key] = callee
        return callee


def _erase_unused(ops: list[Operation]) -> None:
    """Erase the ops (pure: constants, views) that only the moved nests used; users come
    after what they use in `ops`, so erasing in reverse frees each op's operands first."""
    for op in reversed(ops):
        if op.parent is not None and not any(r.uses for r in op.results):
            op.detach()
            op.erase()


def _outline_function(fn: func.FuncOp, module: ModuleOp, min_nests: int, taken: set[str]) -> None:
    """Outline the nests of `fn` when it has more than `min_nests` of them."""
    if len(fn.body.blocks) != 1:
        return
    nests = [op for op in fn.body.blocks[0].ops if isinstance(op, _NESTS) and not op.results]
    if len(nests) <= min_nests:
        return
    outliner = _Outliner(fn, module, taken, {}, fn)
    rebuilt: dict[Operation, None] = {}  # in order, once each
    moved = 0
    for group in _groups(nests):
        found = outliner.outline(group)
        if found is not None:
            moved += len(group)
            rebuilt.update(dict.fromkeys(found.rebuilt))
    _erase_unused(list(rebuilt))
    made = len(outliner.shared)
    remark(PASS, fn, f"{moved} of {len(nests)} loop nests moved into {made} function{'s' * (made != 1)} "
           "(one per distinct nest, or group: a matmul or conv2d with its zero fill and the elementwise nests after it)")


def _symbol_names(module: ModuleOp) -> set[str]:
    return {op.sym_name.data for op in module.ops if isinstance(op, func.FuncOp)}


def _fresh_name(base: str, taken: set[str]) -> str:
    name, n = base, 0
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    taken.add(name)
    return name


@dataclass(frozen=True)
class LoomOutlinePass(ModulePass):
    """Move the loop nests of functions with more than `min_nests` of them into private
    no_inline functions, one per distinct nest."""

    name = "loom-outline"

    min_nests: int = 16

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.min_nests < 0:
            raise LoomError(f"{PASS}: option 'min-nests' must be a non-negative integer, got {self.min_nests}")
        taken = _symbol_names(op)
        for fn in [o for o in op.ops if isinstance(o, func.FuncOp)]:
            _outline_function(fn, op, self.min_nests, taken)

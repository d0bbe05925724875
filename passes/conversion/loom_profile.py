"""loom-profile: time each loop nest of a kernel with the CPU's cycle counter, into a
counters argument the caller reads.

In each public function on memrefs, every top-level loop nest (`affine.for`,
`affine.parallel`, `scf.for`, `scf.parallel`) and every call of a private function
(`loom-outline`'s nests) gets a slot: `loom.ticks` before it and after it, and the
difference added to `counters[slot, 0]` and 1 to `counters[slot, 1]`. `counters`, a
`memref<S x 2 x i64>`, is appended to the function's arguments; the module's
`loom.profile` attribute says, per function, what each slot times: the nest's tag (the
op it came from, `convert-loom-to-affine`'s `loom.tag`, or a call's callee's nests', joined by `+`)
and its source location. `compile(..., profile=True)` runs the pass after the schedule,
passes the kernel's own counters at every call, and `Kernel.profile()` reads them (the
ticks converted to seconds with the counter's measured rate).

The timers run on the calling thread around whole nests, a parallel nest's fork and join
included, so the slots of one call add up to about the call's time less what lies
outside the nests (allocation, the zero fills the nests do not do). Reading the counter
costs about 10-40 cycles; a nest costs one load and one store more per call.

```mlir
func.func @f(%a: memref<64xf32>, %b: memref<64xf32>) {
  affine.for %i = 0 to 64 { ... } {loom.tag = "add"}
}
// becomes
func.func @f(%a: memref<64xf32>, %b: memref<64xf32>, %loom_profile: memref<1x2xi64>) {
  %t0 = loom.ticks : i64
  affine.for %i = 0 to 64 { ... } {loom.tag = "add"}
  %t1 = loom.ticks : i64
  ... %loom_profile[0, 0] += %t1 - %t0, %loom_profile[0, 1] += 1
}
// and the module's attribute loom.profile = {f = [{tag = "add", location = "..."}]}
```

Refused: a function on tensors (run `loom-bufferize` first) and one already profiled.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, arith, func, memref, scf
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IndexType, MemRefType, ModuleOp, StringAttr, TensorType, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import SymbolTable

from dialects.loom import TicksOp
from passes.support.diagnostics import LoomError, op_location

#: the module attribute: function name -> the slots' descriptions
PROFILE_ATTR = "loom.profile"
#: the ops a slot times
NESTS = (affine.ForOp, affine.ParallelOp, scf.ForOp, scf.ParallelOp)


def _tag(op: Operation, module: ModuleOp) -> str:
    """What a slot's op computes: its `loom.tag`, or for a call its callee's nests' (each
    once, in order, joined by `+`: a conv2d's group `direct.pad+matmul`)."""
    if isinstance(op, func.CallOp):
        callee = _function(module, op.callee.string_value())
        nests = [o for o in callee.body.ops if isinstance(o, NESTS)] if callee is not None else []
        return "+".join(dict.fromkeys(_tag(n, module) for n in nests)) or op.callee.string_value()
    tag = op.attributes.get("loom.tag")
    return tag.data if isinstance(tag, StringAttr) else op.name


@dataclass(frozen=True)
class LoomProfilePass(ModulePass):
    """Time each top-level loop nest of each public function into a counters argument."""

    name = "loom-profile"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        profiled = op.attributes.get(PROFILE_ATTR)
        slots = dict(profiled.data) if isinstance(profiled, DictionaryAttr) else {}
        for fn in [f for f in op.ops if isinstance(f, func.FuncOp)]:
            if _private(fn) or not fn.body.blocks:
                continue
            name = fn.sym_name.data
            if name in slots:
                raise LoomError(f"{self.name}: @{name} is profiled already (it takes its counters argument)", fn)
            types = [*fn.function_type.inputs, *fn.function_type.outputs]
            if any(isinstance(t, TensorType) for t in types):
                raise LoomError(f"{self.name}: @{name} works on tensors: run loom-bufferize first (the counters are "
                                "a memref argument)", fn)
            slots[name] = ArrayAttr(_instrument(fn, op))
        op.attributes[PROFILE_ATTR] = DictionaryAttr(slots)


def _instrument(fn: func.FuncOp, module: ModuleOp) -> list[DictionaryAttr]:
    """Time each nest of `fn`'s body into a new last argument; the slots' descriptions."""
    block = fn.body.block
    nests = [o for o in block.ops if isinstance(o, NESTS)
             or isinstance(o, func.CallOp) and _private(_function(module, o.callee.string_value()))]
    counters_type = MemRefType(i64, [len(nests), 2])
    counters = block.insert_arg(counters_type, len(block.args))
    counters.name_hint = "loom_profile"
    fn.function_type = func.FunctionType.from_lists([*fn.function_type.inputs, counters_type],
                                                    list(fn.function_type.outputs))
    rewriter = Rewriter()
    described = []
    for slot, nest in enumerate(nests):
        start = TicksOp()
        rewriter.insert_op(start, InsertPoint.before(nest))
        stop = TicksOp()
        row, ticks, calls = (arith.ConstantOp.from_int_and_width(i, IndexType()) for i in (slot, 0, 1))
        spent = arith.SubiOp(stop.result, start.result)
        once = arith.ConstantOp.from_int_and_width(1, i64)
        ops = [stop, row, ticks, calls, spent, *_add(counters, row, ticks, spent), once, *_add(counters, row, calls, once)]
        rewriter.insert_op(ops, InsertPoint.after(nest))
        described.append(DictionaryAttr({"tag": StringAttr(_tag(nest, module)),
                                         "location": StringAttr(op_location(nest) or "")}))
    return described


def _add(counters: SSAValue, row: Operation, column: Operation, value: Operation) -> list[Operation]:
    """`counters[row, column] += value`."""
    at = [row.results[0], column.results[0]]
    old = memref.LoadOp.get(counters, at)
    new = arith.AddiOp(old.res, value.results[0])
    return [old, new, memref.StoreOp.get(new.result, counters, at)]


def _function(module: ModuleOp, name: str) -> func.FuncOp | None:
    found = SymbolTable.lookup_symbol(module, name)
    return found if isinstance(found, func.FuncOp) else None


def _private(fn: func.FuncOp | None) -> bool:
    return fn is not None and fn.sym_visibility is not None and fn.sym_visibility.data == "private"

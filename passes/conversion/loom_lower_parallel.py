"""loom-lower-parallel: run each scf.parallel on libgomp's threads.

Runs after loom-lower-affine (which turns loom-parallelize's affine.parallel into
scf.parallel) and before convert-scf-to-cf. Each outermost scf.parallel of a function
`@f` becomes three pieces, the OpenMP runtime's own shape for `#pragma omp parallel`:

```mlir
// in @f, where the loop was: the captured values into a context block, then the call
%ctx = llvm.alloca %n x i64                   // at @f's entry, once
llvm.store %a, %ctx[0]  ...  llvm.store %total, %ctx[n - 1]
func.call @GOMP_parallel(@f_parallel0_thread, %ctx, %num_threads, 0)

// what each thread runs: its slice [lo, hi) of the iterations, balanced
func.func private @f_parallel0_thread(%ctx: !llvm.ptr) {
  %a = llvm.load %ctx[0] ... %total = llvm.load %ctx[n - 1]
  %t = omp_get_thread_num(), %nt = omp_get_num_threads()
  func.call @f_parallel0(%a, ..., %total * %t / %nt, %total * (%t + 1) / %nt)
}

// the loop's body over a range of the linearized iterations
func.func private @f_parallel0(%a: memref<...>, ..., %lo: index, %hi: index) {
  scf.for %it = %lo to %hi step 1 { %i = lb + (%it / ...) * step ... body ... }
}
```

The body function takes the buffers as memref arguments, so that loom-convert-to-llvm
gives them `noalias` as it does the kernel's (each is a whole buffer: a function
argument or an allocation, with any view of it rebuilt inside, as loom-outline does);
LLVM inlines it into the thread function and keeps that knowledge as alias scopes.
`GOMP_parallel(fn, data, num_threads, flags)` runs `fn(data)` on a team of threads (the
caller is thread 0) and returns when all are done; libgomp keeps the team between calls.
The thread count is the op's `loom.num_threads` (0: libgomp's default, OMP_NUM_THREADS or
the cores); with 1 the loop runs serially here, as nested scf.parallel loops do (a
thread's slice runs on that thread). A thread's slice is a contiguous range of the
linearized iteration space, sizes differing by at most one.

Refused with a LoomError: a loop that reads a buffer of unknown origin (an scf.if's
result, say: it might alias another, and noalias would be wrong), a loop with results
(reductions), and one whose body allocates (a thread could not report the failure).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, llvm, memref, scf
from xdsl.dialects.builtin import (
    AnyFloat,
    FunctionType,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    UnitAttr,
    UnrealizedConversionCastOp,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from passes.support.diagnostics import LoomError
from passes.analysis.live_ins import OutlineInputs, outline_inputs, use_inside
from passes.analysis.parallel_analysis import NUM_THREADS

PASS = "loom-lower-parallel"
#: the libgomp entry points the lowered code calls (compiler/jit/engine.py loads libgomp)
RUNTIME = {
    "GOMP_parallel": ([llvm.LLVMPointerType(), llvm.LLVMPointerType(), i32, i32], []),
    "omp_get_thread_num": ([], [i32]),
    "omp_get_num_threads": ([], [i32]),
}


@dataclass(frozen=True)
class LoomLowerParallelPass(ModulePass):
    name = "loom-lower-parallel"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        used = False
        for fn in [f for f in op.ops if isinstance(f, func.FuncOp) and f.body.blocks]:
            loops = [p for p in fn.walk() if isinstance(p, scf.ParallelOp)]
            # the nested ones first, innermost first: a thread runs its slice serially
            for loop in reversed([p for p in loops if _inside_parallel(p)]):
                _serialize(loop)
            count = 0
            for loop in [p for p in loops if p.parent is not None]:
                if _threads(loop) == 1:
                    _serialize(loop)
                    continue
                _Outliner(op, fn, loop, f"{fn.sym_name.data}_parallel{count}").run()
                count += 1
                used = True
        if used:
            _declare_runtime(op)


def _threads(loop: scf.ParallelOp) -> int:
    attr = loop.attributes.get(NUM_THREADS)
    return attr.value.data if isinstance(attr, IntegerAttr) else 0


def _inside_parallel(loop: Operation) -> bool:
    parent = loop.parent_op()
    while parent is not None:
        if isinstance(parent, scf.ParallelOp):
            return True
        parent = parent.parent_op()
    return False


def _check(loop: scf.ParallelOp) -> None:
    if loop.results:
        raise LoomError(f"{PASS}: cannot run an scf.parallel with results (reductions) on threads", loop)
    alloc = next((o for o in loop.walk() if isinstance(o, memref.AllocOp)), None)
    if alloc is not None:
        raise LoomError(f"{PASS}: the parallel loop allocates memory in its body ('memref.alloc'): a thread "
                        "could not report failing to; allocate before the loop", alloc)


def _serialize(loop: scf.ParallelOp) -> None:
    """The loop as nested scf.for loops, outermost dimension first."""
    loops = []
    for lb, ub, step in zip(loop.lowerBound, loop.upperBound, loop.step):
        inner = Block(arg_types=[IndexType()])
        loops.append(scf.ForOp(lb, ub, step, [], Region(inner)))
    for outer, inner_loop in zip(loops, loops[1:]):
        outer.body.block.add_ops([inner_loop, scf.YieldOp()])
    _move_body(loop, [f.body.block.args[0] for f in loops], loops[-1].body.block)
    Rewriter.replace_op(loop, loops[0], [])


def _move_body(loop: scf.ParallelOp, ivs: Sequence[SSAValue], into: Block) -> None:
    """Move the parallel loop's body to the end of `into`, its ivs replaced by `ivs` (which
    take their names), its scf.reduce terminator by an scf.yield."""
    body = loop.body.block
    for arg, iv in zip(body.args, ivs):
        iv.name_hint = arg.name_hint
        arg.replace_all_uses_with(iv)
    for op in list(body.ops):
        op.detach()
        into.add_op(op if not isinstance(op, scf.ReduceOp) else scf.YieldOp())


@dataclass
class _Outliner:
    module: ModuleOp
    fn: func.FuncOp
    loop: scf.ParallelOp
    name: str

    def run(self) -> None:
        _check(self.loop)
        entry = self.fn.body.blocks[0]
        found = outline_inputs(self.loop, entry, loop_values=True)
        if found is None:
            raise LoomError(f"{PASS}: the parallel loop reads a buffer that is neither an argument nor an "
                            "allocation of the function (it might alias another), so its iterations cannot be "
                            "given to threads as noalias buffers", self.loop)
        total = self._trip_count()
        body_fn = self._body_function(found)
        thread_fn = self._thread_function([v.type for v in found.arguments], body_fn)
        self._call(found.arguments, total, thread_fn)
        Rewriter.erase_op(self.loop)

    # -- in the caller ---------------------------------------------------------------

    def _before(self, ops: list[Operation]) -> None:
        Rewriter.insert_op(ops, InsertPoint.before(self.loop))

    def _trip_count(self) -> SSAValue:
        """The loop's iteration count, all dimensions (0 for an empty dimension)."""
        zero = arith.ConstantOp(IntegerAttr(0, IndexType()))
        ops: list[Operation] = [zero]
        total: SSAValue | None = None
        self.trips: list[SSAValue] = []
        for lb, ub, step in zip(self.loop.lowerBound, self.loop.upperBound, self.loop.step):
            span = arith.SubiOp(ub, lb)
            count = arith.CeilDivSIOp(span, step)
            clamped = arith.MaxSIOp(count, zero)
            ops += [span, count, clamped]
            self.trips.append(clamped.result)
            if total is None:
                total = clamped.result
            else:
                product = arith.MuliOp(total, clamped)
                ops.append(product)
                total = product.result
        self._before(ops)
        assert total is not None
        return total

    def _call(self, captured: list[SSAValue], total: SSAValue, thread_fn: func.FuncOp) -> None:
        values = [*captured, *self.trips[1:], total]
        entry = self.fn.body.blocks[0]
        count = arith.ConstantOp(IntegerAttr(len(values), i64))
        ctx = llvm.AllocaOp(count, i64, alignment=8)
        ctx.results[0].name_hint = "parallel_ctx"
        Rewriter.insert_op([count, ctx], InsertPoint.at_start(entry))
        ops: list[Operation] = []
        for i, v in enumerate(values):
            slot = llvm.GEPOp(ctx, [i], i64)
            converted, word = _to_slot(v)
            ops += [*converted, slot, llvm.StoreOp(word, slot)]
        address = llvm.AddressOfOp(thread_fn.sym_name.data, llvm.LLVMPointerType())
        threads = arith.ConstantOp(IntegerAttr(_threads(self.loop), i32))
        flags = arith.ConstantOp(IntegerAttr(0, i32))
        call = func.CallOp("GOMP_parallel", [address, ctx, threads, flags], [])
        call.location = self.loop.location
        self._before([*ops, address, threads, flags, call])

    # -- the new functions -----------------------------------------------------------

    def _body_function(self, found: OutlineInputs) -> func.FuncOp:
        """@name(captured..., trips of dimensions 1.., lo, hi): the loop's body over the
        linearized iterations [lo, hi)."""
        n, captured = len(self.trips), found.arguments
        block = Block(arg_types=[*(v.type for v in captured), *([IndexType()] * (n + 1))])
        mapping = found.rebuild(block)
        trips = [None, *block.args[len(captured): len(captured) + n - 1]]  # the first is not needed
        lo, hi = block.args[-2], block.args[-1]
        lo.name_hint, hi.name_hint = "lo", "hi"
        one = arith.ConstantOp(IntegerAttr(1, IndexType()))
        block.add_op(one)
        inner = Block(arg_types=[IndexType()])
        inner.args[0].name_hint = "it"
        block.add_ops([scf.ForOp(lo, hi, one, [], Region(inner)), func.ReturnOp()])
        # the ivs from the linear iteration number, the last dimension fastest
        rest = inner.args[0]
        bounds = list(zip(self.loop.lowerBound, self.loop.step))
        ivs: list[SSAValue] = [rest] * n
        for d in reversed(range(n)):
            if d > 0:
                index = arith.RemUIOp(rest, trips[d])
                rest_next = arith.DivUIOp(rest, trips[d])
                inner.add_ops([index, rest_next])
                ivs[d], rest = index.result, rest_next.result
            else:
                ivs[d] = rest
        for d, (lb, step) in enumerate(bounds):
            scaled = arith.MuliOp(ivs[d], mapping.get(step, step))
            shifted = arith.AddiOp(mapping.get(lb, lb), scaled)
            inner.add_ops([scaled, shifted])
            ivs[d] = shifted.result
        _move_body(self.loop, ivs, inner)
        use_inside(inner, mapping)
        new = func.FuncOp(self.name, ([a.type for a in block.args], []), Region(block), "private")
        new.location = self.loop.location
        Rewriter.insert_op(new, InsertPoint.after(self.fn))
        return new

    def _thread_function(self, types: list[Attribute], body_fn: func.FuncOp) -> func.FuncOp:
        """@name_thread(%ctx): the captured values from the context, this thread's slice,
        then the body function."""
        block = Block(arg_types=[llvm.LLVMPointerType()])
        ctx = block.args[0]
        ctx.name_hint = "ctx"
        n = len(self.trips)
        args: list[SSAValue] = []
        for i, t in enumerate([*types, *([IndexType()] * n)]):
            slot = llvm.GEPOp(ctx, [i], i64)
            word = llvm.LoadOp(slot, i64)
            converted, value = _from_slot(word.dereferenced_value, t)
            block.add_ops([slot, word, *converted])
            args.append(value)
        total = args.pop()
        tid = func.CallOp("omp_get_thread_num", [], [i32])
        nth = func.CallOp("omp_get_num_threads", [], [i32])
        tid_i = arith.IndexCastOp(tid, IndexType())
        nth_i = arith.IndexCastOp(nth, IndexType())
        one = arith.ConstantOp(IntegerAttr(1, IndexType()))
        next_tid = arith.AddiOp(tid_i, one)
        lo_num = arith.MuliOp(total, tid_i)
        hi_num = arith.MuliOp(total, next_tid)
        lo = arith.DivUIOp(lo_num, nth_i)
        hi = arith.DivUIOp(hi_num, nth_i)
        call = func.CallOp(body_fn.sym_name.data, [*args, lo, hi], [])
        block.add_ops([tid, nth, tid_i, nth_i, one, next_tid, lo_num, hi_num, lo, hi, call, func.ReturnOp()])
        new = func.FuncOp(f"{self.name}_thread", ([llvm.LLVMPointerType()], []), Region(block), "private")
        new.attributes["no_inline"] = UnitAttr()  # called through GOMP_parallel only
        new.location = self.loop.location
        Rewriter.insert_op(new, InsertPoint.after(self.fn))
        return new


def _to_slot(v: SSAValue) -> tuple[list[Operation], SSAValue]:
    """The ops that turn `v` into the i64 of a context slot, and that i64: a buffer's
    address, an index, an integer zero-extended, a float's bits."""
    t = v.type
    if isinstance(t, MemRefType):
        ptr = UnrealizedConversionCastOp.get([v], [llvm.LLVMPointerType()])
        word = llvm.PtrToIntOp(ptr, i64)
        return [ptr, word], word.results[0]
    if isinstance(t, IndexType):
        word = arith.IndexCastOp(v, i64)
        return [word], word.result
    if isinstance(t, IntegerType):
        if t.width.data == 64:
            return [], v
        if t.width.data > 64:
            raise LoomError(f"{PASS}: cannot pass a value of type {t} to the threads", v.owner)  # type: ignore[arg-type]
        word = arith.ExtUIOp(v, i64)
        return [word], word.result
    if isinstance(t, AnyFloat) and t.bitwidth <= 64:
        bits = arith.BitcastOp(v, IntegerType(t.bitwidth))
        ops, word = _to_slot(bits.result)
        return [bits, *ops], word
    raise LoomError(f"{PASS}: cannot pass a value of type {t} to the threads (capture it inside the loop)",
                    v.owner if isinstance(v.owner, Operation) else None)


def _from_slot(word: SSAValue, t: Attribute) -> tuple[list[Operation], SSAValue]:
    """The ops that turn a context slot's i64 back into a value of type `t`."""
    if isinstance(t, MemRefType):
        ptr = llvm.IntToPtrOp(word)
        value = UnrealizedConversionCastOp.get([ptr.results[0]], [t])
        return [ptr, value], value.results[0]
    if isinstance(t, IndexType):
        value = arith.IndexCastOp(word, t)
        return [value], value.result
    if isinstance(t, IntegerType):
        if t.width.data == 64:
            return [], word
        value = arith.TruncIOp(word, t)
        return [value], value.result
    assert isinstance(t, AnyFloat)
    ops, bits = _from_slot(word, IntegerType(t.bitwidth))
    value = arith.BitcastOp(bits, t)
    return [*ops, value], value.result


def _declare_runtime(module: ModuleOp) -> None:
    present = {f.sym_name.data for f in module.ops if isinstance(f, func.FuncOp)}
    for name, (inputs, outputs) in RUNTIME.items():
        if name not in present:
            module.body.block.add_op(func.FuncOp(name, FunctionType.from_lists(inputs, outputs), Region(), "private"))

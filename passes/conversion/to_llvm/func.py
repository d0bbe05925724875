"""func → llvm: functions, calls and returns, and what lets a function that allocates
report a failure (which functions may fail, and the paths that free what they hold and
return the status)."""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass

from xdsl.dialects import func, llvm, memref
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    UnitAttr,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import Rewriter

from passes.conversion.to_llvm.abi import ALLOC_SITE, PASS, STATUS, convert_type
from passes.conversion.to_llvm.common import Externals, Lowering, Rewrite, unrealized_cast
from passes.support.diagnostics import LoomError


def _convert_block_args(block: Block, op: Operation) -> None:
    """Give `block`'s arguments LLVM types; a cast at the block start keeps the old type
    visible to the ops inside until they are lowered."""
    for arg in list(block.args):
        want = convert_type(arg.type, op)
        if want == arg.type:
            continue
        old_type = arg.type
        new_arg = Rewriter.replace_value_with_new_type(arg, want)
        cast = unrealized_cast(new_arg, old_type)
        if block.first_op is not None:
            block.insert_op_before(cast, block.first_op)
        else:
            block.add_op(cast)
        new_arg.replace_uses_with_if(cast.results[0], lambda use: use.operation is not cast)


def failing_functions(module: ModuleOp) -> set[str]:
    """The defined functions that may fail at run time: those that allocate on the heap
    (`memref.alloc`) or call one that may fail. They return a status (`STATUS`); one that
    returns a value could not report a failure, and is refused."""
    funcs = {f.sym_name.data: f for f in module.ops if isinstance(f, func.FuncOp) and f.body.blocks}
    callees = {name: {c.callee.string_value() for c in f.walk() if isinstance(c, func.CallOp)} for name, f in funcs.items()}
    failing = {name for name, f in funcs.items() if any(isinstance(o, memref.AllocOp) for o in f.walk())}
    grown = True
    while grown:
        callers = {name for name in funcs.keys() - failing if callees[name] & failing}
        failing |= callers
        grown = bool(callers)
    for name in sorted(failing):
        f = funcs[name]
        if f.function_type.outputs.data:
            raise LoomError(f"{PASS}: '@{name}' allocates memory on the heap (or calls a function that does) and "
                            "returns a value, so it could not report an allocation failure; return results "
                            "through out-parameters (as loom-bufferize does)", f)
    return failing


@dataclass
class FuncLowering(RewritePattern):
    """func.func → llvm.func; memref arguments become `!llvm.ptr {llvm.noalias, llvm.nocapture}`;
    a function that may fail returns its status."""

    failing: set[str]

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: func.FuncOp, rewriter: PatternRewriter) -> None:
        ftype = op.function_type
        if len(ftype.outputs) > 1:
            raise LoomError(f"{PASS}: '{op.sym_name.data}' returns {len(ftype.outputs)} values; at most one is supported", op)
        inputs = [convert_type(t, op) for t in ftype.inputs]
        output = convert_type(ftype.outputs.data[0], op) if ftype.outputs else llvm.LLVMVoidType()
        if op.sym_name.data in self.failing:
            output = STATUS
        # A returned memref may be (a view of) an argument: then no argument is nocapture.
        returns_memref = any(isinstance(t, MemRefType) for t in ftype.outputs)
        arg_attrs: list[DictionaryAttr] = []
        for i, t in enumerate(ftype.inputs):
            attrs = dict(op.arg_attrs.data[i].data) if op.arg_attrs is not None else {}
            if isinstance(t, MemRefType):
                attrs["llvm.noalias"] = UnitAttr()
                if not returns_memref:
                    attrs["llvm.nocapture"] = UnitAttr()
            arg_attrs.append(DictionaryAttr(attrs))
        body = rewriter.move_region_contents_to_new_regions(op.body)
        for block in body.blocks:
            _convert_block_args(block, op)
        is_private = op.sym_visibility is not None and op.sym_visibility.data == "private"
        props: dict[str, Attribute | None] = {}
        if any(a.data for a in arg_attrs):
            props["arg_attrs"] = ArrayAttr(arg_attrs)
        if body.blocks:
            props["no_unwind"] = UnitAttr()
        if "no_inline" in op.attributes:  # loom-outline's functions: LLVM must not inline them back
            props["no_inline"] = UnitAttr()
        new = llvm.FuncOp(
            op.sym_name,
            llvm.LLVMFunctionType(inputs, output),
            linkage=llvm.LinkageAttr("internal" if is_private and body.blocks else "external"),
            body=body,
            other_props=props,
        )
        new.location = op.location
        rewriter.replace(op, new, [])


class ReturnLowering(Lowering):
    """func.return → llvm.return; in a function that returns a status (it had no
    results), `llvm.return 0`: success."""

    sources = (func.ReturnOp,)

    def lower(self, op: func.ReturnOp, r: Rewrite) -> None:
        if len(op.arguments) > 1:
            raise r.refuse("more than one returned value")
        fn = op.parent_op()
        if not op.arguments and isinstance(fn, llvm.FuncOp) and fn.function_type.output == STATUS:
            r.rewriter.replace(op, llvm.ReturnOp(r.const(0, STATUS)), [])
            return
        r.rewriter.replace(op, llvm.ReturnOp(r.value(op.arguments[0]) if op.arguments else None), [])


@dataclass
class CallLowering(Lowering):
    """func.call → llvm.call; a call of a function that may fail gets its status (checked
    by `add_failure_paths`)."""

    failing: set[str]
    sources = (func.CallOp,)

    def lower(self, op: func.CallOp, r: Rewrite) -> None:
        if len(op.res) > 1:
            raise r.refuse("more than one result")
        callee = op.callee.string_value()
        if callee in self.failing:
            r.add(llvm.CallOp(callee, *r.values(op.arguments), return_type=STATUS))
            r.replace()
            return
        ret = r.type(op.res[0].type) if op.res else None
        call = r.add(llvm.CallOp(callee, *r.values(op.arguments), return_type=ret))
        r.replace(*call.results)


def _is_call(op: Operation, callees: set[str] | str) -> bool:
    if not isinstance(op, llvm.CallOp) or op.callee is None:
        return False
    name = op.callee.string_value()
    return name == callees if isinstance(callees, str) else name in callees


_ALLOC, _FREE, _CALL = range(3)


def _held_buffers(fn: llvm.FuncOp, failing: set[str]) -> tuple[list[SSAValue], dict[llvm.CallOp, int]]:
    """The heap buffers of `fn` (its aligned_alloc calls' results, in order) and, for each
    call that may fail (an allocation, or a call of a function that may fail), those held
    when it runs, as a bit set over that list: allocated on every path from the entry and
    not freed since (a forward must-analysis over the blocks; bit sets keep it linear in
    the size of the function). A `free` of a pointer not known to be held (a view of a
    buffer, an argument) forgets every buffer: leaking on the failure path is safe,
    freeing twice is not."""
    blocks = list(fn.body.blocks)
    calls = [(b, op) for b in blocks for op in b.ops if isinstance(op, llvm.CallOp)]
    buffers = [op.results[0] for _, op in calls if ALLOC_SITE in op.attributes]
    bit = {v: i for i, v in enumerate(buffers)}
    events: dict[Block, list[tuple[int, llvm.CallOp, int]]] = {b: [] for b in blocks}
    for b, op in calls:
        if ALLOC_SITE in op.attributes:
            events[b].append((_ALLOC, op, bit[op.results[0]]))
        elif _is_call(op, failing):
            events[b].append((_CALL, op, -1))
        elif _is_call(op, {"free", "loom_give"}):
            events[b].append((_FREE, op, bit.get(op.args[0], -1)))

    def step(block: Block, held: int, seen: dict[llvm.CallOp, int] | None) -> int:
        for kind, op, i in events[block]:
            if kind != _FREE and seen is not None:
                seen[op] = held
            if kind == _ALLOC:
                held |= 1 << i
            elif kind == _FREE:
                held = held & ~(1 << i) if i >= 0 and held >> i & 1 else 0
        return held

    preds: dict[Block, list[Block]] = {b: [] for b in blocks}
    for b in blocks:
        for succ in b.last_op.successors if b.last_op is not None else ():
            preds[succ].append(b)
    held_out: dict[Block, int] = {}

    def held_in(b: Block) -> int | None:
        if b is blocks[0]:
            return 0
        known = [held_out[p] for p in preds[b] if p in held_out]
        if not known:
            return None  # not reached yet: the intersection of nothing
        return functools.reduce(operator.and_, known)

    changed = True
    while changed:  # the sets only shrink, so this ends
        changed = False
        for b in blocks:
            start = held_in(b)
            if start is not None and held_out.get(b) != (out := step(b, start, None)):
                held_out[b] = out
                changed = True
    seen: dict[llvm.CallOp, int] = {}
    for b in blocks:
        step(b, held_in(b) or 0, seen)
    return buffers, seen


_EQ, _NE = (IntegerAttr(llvm.ICmpPredicateFlag(p).to_int(), i64) for p in ("eq", "ne"))  # llvm.icmp predicates


class _Cleanup:
    """The blocks a failure branches to, with its status as their argument: the one for a
    set of held buffers frees the latest and branches to the one for the rest; the one for
    none returns the status. Shared between failure points, so that n allocations held
    one after another need n blocks, not n^2 frees."""

    def __init__(self, fn: llvm.FuncOp, buffers: list[SSAValue], externals: Externals):
        self.fn = fn
        self.buffers = buffers
        self.externals = externals
        self.blocks: dict[int, Block] = {}

    def block(self, held: int) -> Block:
        """The cleanup block of the buffers in the bit set `held` (made with those of
        its subsets it needs)."""
        wanted, chain = held, []
        while held not in self.blocks and held:
            chain.append(held)
            held &= ~(1 << (held.bit_length() - 1))
        if held not in self.blocks:  # none held: return the status
            done = self._new(0)
            done.add_op(llvm.ReturnOp(done.args[0]))
        for s in reversed(chain):
            latest = s.bit_length() - 1
            block = self._new(s)
            self.externals.use("free", [llvm.LLVMPointerType()], llvm.LLVMVoidType())
            block.add_ops([llvm.CallOp("free", self.buffers[latest]),
                           llvm.BrOp(self.blocks[s & ~(1 << latest)], block.args[0])])
        return self.blocks[wanted]

    def _new(self, held: int) -> Block:
        block = Block(arg_types=[STATUS])
        self.fn.body.add_block(block)  # after the function's blocks: the way on reads straight
        self.blocks[held] = block
        return block


def _split_after(op: Operation) -> Block:
    """Move the ops after `op` to a new block right after `op`'s (xDSL's Block.split_before
    walks the region to find the block's index: quadratic over many splits)."""
    block = op.parent_block()
    assert block is not None and block.parent is not None and op.next_op is not None
    rest = Block()
    while (moved := op.next_op) is not None:
        moved.detach()
        rest.add_op(moved)
    block.parent.insert_block_after(rest, block)
    return rest


def add_failure_paths(module: ModuleOp, failing: set[str], externals: Externals) -> None:
    """After each call that may fail in a function that returns a status: if the
    allocation returned null (or the callee a nonzero status), branch (unlikely) to the
    cleanup of the buffers held, which returns the site number (the callee's status)."""
    for fn in module.ops:
        if not isinstance(fn, llvm.FuncOp) or fn.sym_name.data not in failing:
            continue
        buffers, points = _held_buffers(fn, failing)
        kinds = {ALLOC_SITE in call.attributes for call in points}  # allocations, calls
        zero = {t: llvm.ConstantOp(IntegerAttr(0, t), t).result for t, used in
                ((i1, True), (i64, True in kinds), (STATUS, False in kinds)) if used}  # at the entry
        entry = fn.body.blocks[0]
        entry.insert_ops_before([v.owner for v in zero.values()], entry.first_op)
        cleanup = _Cleanup(fn, buffers, externals)
        targets = {call: cleanup.block(held) for call, held in points.items()}  # in program order
        for call, target in reversed(targets.items()):  # the last of a block first: each op moves once
            block = call.parent_block()
            assert block is not None
            rest = _split_after(call)
            result = call.results[0]
            if ALLOC_SITE in call.attributes:
                # xDSL's llvm.icmp takes no pointers; LLVM folds (ptrtoint p) == 0 into p == null
                address = llvm.PtrToIntOp(result)
                failed = llvm.ICmpOp(address.results[0], zero[i64], _EQ)
                code = llvm.ConstantOp(call.attributes[ALLOC_SITE].data["site"], STATUS)  # type: ignore[union-attr]
                block.add_ops([address, failed, code])
                status = code.result
            else:
                failed = llvm.ICmpOp(result, zero[STATUS], _NE)
                block.add_op(failed)
                status = result
            unlikely = llvm.CallIntrinsicOp("llvm.expect.i1", [failed.res, zero[i1]], [i1])
            block.add_ops([unlikely, llvm.CondBrOp(unlikely.results[0], target, [status], rest, [])])

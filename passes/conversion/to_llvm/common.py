"""What every lowering to the llvm dialect shares (MLIR's LLVMCommon): the rewrite of one
op with its operands seen as LLVM values, the pattern base class and the table that
dispatches to it, the external functions the lowered code calls, and the clean-up after
the patterns (one constant per value, casts reconciled, leftovers refused)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from xdsl.dialects import arith, func, llvm
from xdsl.dialects.builtin import (
    IntegerAttr,
    ModuleOp,
    UnrealizedConversionCastOp,
    i64,
)
from xdsl.ir import Attribute, Operation, OpResult, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import InsertPoint, Rewriter

from passes.conversion.to_llvm.abi import PASS, convert_type
from passes.support.diagnostics import LoomError


def unrealized_cast(value: SSAValue, to: Attribute) -> UnrealizedConversionCastOp:
    return UnrealizedConversionCastOp.get([value], [to])


def fastmath(op: Operation) -> llvm.FastMathAttr:
    flags = getattr(op, "fastmath", None)
    if isinstance(flags, arith.FastMathFlagsAttr) and flags.data:
        return llvm.FastMathAttr(tuple(flags.data))
    return llvm.FastMathAttr(None)


class Rewrite:
    """One op's rewrite: LLVM-typed operands in, new ops inserted before it, results out.

    `value(v)` gives the LLVM-typed version of operand `v` (looking through the casts of
    earlier rewrites, or adding one); `add(op)` inserts a new op before the old one;
    `replace(*values)` replaces the old op's results, casting back to the old types so
    that not-yet-lowered users still type-check.
    """

    def __init__(self, op: Operation, rewriter: PatternRewriter):
        self.op = op
        self.rewriter = rewriter

    def type(self, t: Attribute) -> Attribute:
        return convert_type(t, self.op)

    def value(self, v: SSAValue) -> SSAValue:
        want = self.type(v.type)
        if v.type == want:
            return v
        owner = v.owner
        if isinstance(owner, UnrealizedConversionCastOp) and owner.inputs[0].type == want:
            return owner.inputs[0]
        return self.add(unrealized_cast(v, want)).results[0]

    def values(self, vs: Sequence[SSAValue]) -> list[SSAValue]:
        return [self.value(v) for v in vs]

    def add(self, new: Operation) -> Operation:
        self.rewriter.insert(new, InsertPoint.before(self.op))
        return new

    def result(self, new: Operation) -> SSAValue:
        return self.add(new).results[0]

    def const(self, value: int, t: Attribute = i64) -> SSAValue:
        return self.result(llvm.ConstantOp(IntegerAttr(value, t), t))

    def replace(self, *values: SSAValue) -> None:
        results: list[SSAValue] = []
        for old, new in zip(self.op.results, values, strict=True):
            if old.name_hint and not new.name_hint and isinstance(new, OpResult):
                new.name_hint = old.name_hint  # %t = memref.alloc → %t = llvm.call
            results.append(new if new.type == old.type else self.result(unrealized_cast(new, old.type)))
        self.rewriter.replace(self.op, [], results)

    def refuse(self, why: str) -> LoomError:
        return LoomError(f"{PASS}: cannot lower '{self.op.name}': {why}", self.op)


class Lowering(RewritePattern):
    """A pattern that lowers the op types in `sources` with `lower(op, rewrite)`."""

    sources: ClassVar[tuple[type[Operation], ...]] = ()

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if isinstance(op, self.sources):
            self.lower(op, Rewrite(op, rewriter))

    def lower(self, op, r: Rewrite) -> None:  # noqa: ANN001 - each subclass narrows op
        raise NotImplementedError


def share_constants(module: ModuleOp) -> None:
    """One arith.constant per value and type in each function, at its entry: loom-lower-affine's
    expansions made one per map, and every op costs the lowering to LLVM time (LLVM would merge
    them anyway)."""
    for fn in module.ops:
        if not isinstance(fn, func.FuncOp) or not fn.body.blocks:
            continue
        entry = fn.body.blocks[0]
        first: dict[tuple[Attribute, Attribute], arith.ConstantOp] = {}
        last: arith.ConstantOp | None = None
        for const in [o for o in fn.walk() if isinstance(o, arith.ConstantOp)]:
            key = (const.value, const.result.type)
            if key in first:
                const.result.replace_all_uses_with(first[key].result)
                const.detach()
                const.erase()
                continue
            first[key] = const
            const.detach()
            if last is not None:
                entry.insert_op_after(const, last)
            elif entry.first_op is not None:
                entry.insert_op_before(const, entry.first_op)
            else:
                entry.add_op(const)
            last = const


class Dispatch(RewritePattern):
    """The lowerings as one pattern that looks each op's type up in a table: one dict
    lookup per op instead of trying every pattern in turn (a faithful conversion, no DCE)."""

    def __init__(self, patterns: Sequence[Lowering]):
        self.table: dict[type[Operation], Lowering | None] = {}
        for p in patterns:
            for source in p.sources:
                self.table.setdefault(source, p)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        kind = type(op)
        if kind not in self.table:  # a subclass of a source, or no lowering: looked up once
            self.table[kind] = next((p for t, p in self.table.items() if p and isinstance(op, t)), None)
        if (pattern := self.table[kind]) is not None:
            pattern.lower(op, Rewrite(op, rewriter))


@dataclass
class Externals:
    """External functions the lowered code calls (declared once, after the walk)."""

    functions: dict[str, llvm.LLVMFunctionType] = field(default_factory=dict)

    def use(self, name: str, inputs: Sequence[Attribute], output: Attribute) -> str:
        self.functions.setdefault(name, llvm.LLVMFunctionType(list(inputs), output))
        return name

    def declare_in(self, module: ModuleOp) -> None:
        existing = {op.sym_name.data for op in module.ops if isinstance(op, llvm.FuncOp)}
        for name, ftype in self.functions.items():
            if name not in existing:
                module.body.block.add_op(llvm.FuncOp(name, ftype, linkage=llvm.LinkageAttr("external")))


def reconcile_casts(module: ModuleOp) -> None:
    """Drop the unrealized casts: each must now be a no-op (A→A) or undo another (A→B→A)."""
    changed = True
    while changed:
        changed = False
        for cast in [o for o in module.walk() if isinstance(o, UnrealizedConversionCastOp)]:
            src, res = cast.inputs[0], cast.results[0]
            if src.type == res.type:
                res.replace_all_uses_with(src)
            elif isinstance(src.owner, UnrealizedConversionCastOp) and src.owner.inputs[0].type == res.type:
                res.replace_all_uses_with(src.owner.inputs[0])
            if not res.uses:
                Rewriter.erase_op(cast)
                changed = True
    for cast in module.walk():
        if isinstance(cast, UnrealizedConversionCastOp):
            user = next(iter(cast.results[0].uses)).operation
            raise LoomError(f"{PASS}: internal error: a {cast.inputs[0].type} value is used as {cast.results[0].type} by '{user.name}'", user)


def refuse_leftovers(module: ModuleOp) -> None:
    for op in module.walk():
        if op is module or isinstance(op, UnrealizedConversionCastOp) or op.name.startswith("llvm."):
            continue
        raise LoomError(f"{PASS}: no lowering to the llvm dialect for '{op.name}'", op)

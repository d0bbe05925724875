"""loom-convert-to-llvm: func/arith/math/cf/memref (after convert-scf-to-cf) → llvm dialect.

xDSL 0.74 has no usable func/arith/cf/math/memref → llvm conversions (its memref → ptr
route goes through ptrtoint/inttoptr, which stops LLVM from vectorizing), so Loom has
its own, built to give LLVM what it needs to optimize: plain pointers, `noalias`
arguments and `getelementptr inbounds` addressing.

Memref ABI (the runtime relies on it)
-------------------------------------
* Only static memrefs: static shape and a static layout (identity, or
  `strided<[s0, ..., sn], offset: o>` with static values). Anything dynamic is refused.
* A memref value is one `!llvm.ptr`: the address of element 0 of the underlying
  buffer (the base, *before* the layout offset is applied).
* A memref function argument is an `!llvm.ptr {llvm.noalias, llvm.nocapture}`.
* `A[i0, ..., in]` is `getelementptr inbounds T, ptr %A, i64 (o + Σ ik·sk)`; the index
  is computed in i64 with `mul nsw`/`add nsw`, constant parts folded.
* `memref.alloc` calls `aligned_alloc(64, bytes rounded up to 64)`, `memref.dealloc`
  calls `free`; from `compiler.jit.pool.MIN_BYTES` (64 KiB) up, `loom_take(64, bytes)` and
  `loom_give(ptr, bytes)` instead, which keep the buffer for the next call (page faults
  on fresh pages cost as much as a large convolution: compiler/jit/pool.py); `memref.alloca` is an `llvm.alloca`. A memref of 2^63 bytes or more is
  refused (its sizes and addresses would wrap around in i64).
* `index` is `i64`.

Allocation failure (the runtime relies on it)
---------------------------------------------
A defined function that allocates on the heap, or calls one that does, may fail: it
returns an `i32` status instead of nothing. 0 is success; k > 0 says that allocation
site k of the module (numbered from 1 in module order) got a null pointer. Each
`aligned_alloc` call carries `{alloc_site = {site = k, name = "t", type = memref<...>}}`
and the alloc's location, from which the runtime (compiler/driver.py) builds its table of
sites. After a failed allocation, or a call that returned a nonzero status, the
function frees the heap buffers it holds at that point (those allocated on every path
to it and not yet freed) and returns k (the callee's status, unchanged). The check is
one compare and branch per allocation, marked unlikely (`llvm.expect`). A function that
may fail and returns a value is refused: it has no way to report the failure.

How the pass works
------------------
1. Signatures: each func.func becomes an llvm.func; block arguments of every block get
   their LLVM types, with an `unrealized_conversion_cast` back to the old type so that
   the ops inside still see memref/index values (a memref load needs the memref type).
2. Ops: one small pattern per source op or per family (tables). A pattern reads its
   operands as LLVM values (`_Rewrite.value`, looking through the casts), builds llvm
   ops, and hands its results back through casts to the old types.
3. Any non-llvm op left is refused by name and location; the casts then cancel out.

What is lowered: func.func/return/call; arith constants, integer and float arithmetic
(fastmath and nsw/nuw flags kept), min/max, floordiv/ceildiv, cmpi/cmpf/select, all
casts; math ops (llvm intrinsic ops where xDSL has them, `llvm.call_intrinsic` with a
mangled name otherwise, libm calls for erf/cbrt/…); cf.br/cond_br; memref
load/store/alloc/alloca/dealloc/dim and static views (subview, reinterpret_cast, cast,
collapse/expand_shape, assume_alignment); loom.prefetch (llvm.prefetch); the 1-D vector
ops loom-vectorize emits: vector.load/store (an llvm.load/store of the vector type,
element-aligned), maskedload/maskedstore (llvm.intr.masked.load/store), broadcast
(insertelement + shufflevector), fma (llvm.intr.fma), create_mask (icmp of a lane-number
vector with a splat), reduction <add> (llvm.intr.vector.reduce.fadd, fastmath flags
kept: `reassoc` makes it a tree sum), extract/insert of a lane and shuffle. Anything else
is refused by name.

Types are converted in one place (`convert_type`). Elementwise ops take vector operands
the same way as scalars (arith.addf on vector<8xf32> → llvm.fadd on vector<8xf32>), so
vector support can be added op by op.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects import arith, cf, func, llvm, math, memref, vector
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    NoneAttr,
    Signedness,
    StridedLayoutAttr,
    StringAttr,
    UnitAttr,
    UnrealizedConversionCastOp,
    VectorType,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, OpResult, Operation, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint, Rewriter

from compiler.jit import pool
from passes.support.diagnostics import LoomError
from dialects.loom import PrefetchOp
from dialects.llvm_ext import (
    ExtractElementOp,
    FPToSIOp,
    FPToUIOp,
    MaskedLoadOp,
    UIToFPOp,
)

PASS = "loom-convert-to-llvm"

# --------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------

_SCALARS = (IntegerType, Float16Type, Float32Type, Float64Type)
_FLOATS = (Float16Type, Float32Type, Float64Type)  # bf16: xDSL's LLVM emitter has no bfloat


def convert_type(t: Attribute, op: Operation | None = None) -> Attribute:
    """The LLVM-dialect type of a func/arith/memref-level type (the one place it is decided)."""
    if isinstance(t, IndexType):
        return i64
    if isinstance(t, IntegerType):
        if t.signedness.data != Signedness.SIGNLESS:
            raise LoomError(f"{PASS}: only signless integers can be lowered, got {t}", op)
        return t
    if isinstance(t, _FLOATS):
        return t
    if isinstance(t, VectorType):
        if t.get_num_scalable_dims():
            raise LoomError(f"{PASS}: scalable vectors are not supported: {t}", op)
        if t.get_num_dims() != 1:
            raise LoomError(f"{PASS}: only 1-D vectors can be lowered (unroll {t} first)", op)
        return VectorType(convert_type(t.element_type, op), t.get_shape())
    if isinstance(t, MemRefType):
        memref_layout(t, op)  # refuses what the ABI cannot express
        return llvm.LLVMPointerType()
    if isinstance(t, (llvm.LLVMPointerType, llvm.LLVMStructType, llvm.LLVMArrayType)):
        return t
    raise LoomError(f"{PASS}: no LLVM type for {t}", op)


@dataclass(frozen=True)
class MemrefLayout:
    """A static memref: where element (i0..in) lives, relative to the base pointer."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    element_type: Attribute  # already an LLVM type

    def span(self) -> tuple[int, int]:
        """Lowest and highest element index addressed, relative to the base ((0, -1) if empty)."""
        if any(n == 0 for n in self.shape):
            return 0, -1
        reach = [(n - 1) * s for n, s in zip(self.shape, self.strides)]
        return self.offset + sum(min(0, d) for d in reach), self.offset + sum(max(0, d) for d in reach)

    def extent(self) -> int:
        """Elements from the base to one past the last element (the buffer size)."""
        return self.span()[1] + 1

    def element_bytes(self) -> int:
        return _byte_size(self.element_type)


def memref_layout(t: MemRefType, op: Operation | None = None) -> MemrefLayout:
    """The static layout of `t`, or a LoomError saying why the ABI cannot express it."""
    why = "only static shapes and layouts can be lowered (a memref is passed as a bare pointer)"
    if not isinstance(t.memory_space, NoneAttr):
        raise LoomError(f"{PASS}: memref memory spaces are not supported: {t}", op)
    shape = t.get_shape()
    if any(n < 0 for n in shape):
        raise LoomError(f"{PASS}: {t} has a dynamic shape; {why}", op)
    layout = t.layout
    if isinstance(layout, NoneAttr) or (isinstance(layout, AffineMapAttr) and layout.data == AffineMap.identity(len(shape))):
        strides, offset = tuple(MemRefType.strides_for_shape(shape)), 0
    elif isinstance(layout, StridedLayoutAttr):
        raw_strides, raw_offset = layout.get_strides(), layout.get_offset()
        if raw_offset is None or any(s is None for s in raw_strides):
            raise LoomError(f"{PASS}: {t} has a dynamic layout; {why}", op)
        strides, offset = tuple(s for s in raw_strides if s is not None), raw_offset
    else:
        raise LoomError(f"{PASS}: {t} has a non-strided layout; {why}", op)
    element = t.element_type
    if not isinstance(element, (*_SCALARS, IndexType, VectorType)):
        raise LoomError(f"{PASS}: unsupported memref element type {element}", op)
    result = MemrefLayout(shape, strides, offset, convert_type(element, op))
    low, high = result.span()
    if low < 0:
        raise LoomError(f"{PASS}: {t} addresses elements before its base pointer (negative offset)", op)
    if (high + 1) * result.element_bytes() > I64_MAX or any(abs(s) > I64_MAX for s in strides):
        raise LoomError(f"{PASS}: {t} spans {(high + 1) * result.element_bytes()} bytes, more than a 64-bit "
                        "address or size can hold (2^63 - 1)", op)
    return result


I64_MAX = 2**63 - 1


def _byte_size(t: Attribute) -> int:
    if isinstance(t, IntegerType):
        return max(1, (t.width.data + 7) // 8)
    if isinstance(t, Float16Type):
        return 2
    if isinstance(t, Float32Type):
        return 4
    if isinstance(t, Float64Type):
        return 8
    if isinstance(t, VectorType):
        size = _byte_size(t.element_type) * t.element_count()
        return 1 << (size - 1).bit_length()  # LLVM rounds vector allocations to a power of 2
    raise AssertionError(f"no byte size for {t}")


def _scalar_bytes(t: Attribute) -> int:
    return _byte_size(t.element_type if isinstance(t, VectorType) else t)


def mangle(t: Attribute) -> str:
    """The suffix of an overloaded LLVM intrinsic for type `t` (f32, v8f32, i64, p0)."""
    if isinstance(t, VectorType):
        return f"v{t.element_count()}{mangle(t.element_type)}"
    if isinstance(t, IntegerType):
        return f"i{t.width.data}"
    names = {Float16Type: "f16", Float32Type: "f32", Float64Type: "f64"}
    if type(t) in names:
        return names[type(t)]
    if isinstance(t, llvm.LLVMPointerType):
        return "p0"
    raise AssertionError(f"cannot mangle {t}")


# --------------------------------------------------------------------------------------
# Rewriting helpers
# --------------------------------------------------------------------------------------


def _cast(value: SSAValue, to: Attribute) -> UnrealizedConversionCastOp:
    return UnrealizedConversionCastOp.get([value], [to])


def _constant_int(value: SSAValue) -> int | None:
    """The integer a value is known to be (an arith/llvm constant, maybe behind casts)."""
    while isinstance(value.owner, UnrealizedConversionCastOp):
        value = value.owner.inputs[0]
    owner = value.owner
    if isinstance(owner, (arith.ConstantOp, llvm.ConstantOp)) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def _fastmath(op: Operation) -> llvm.FastMathAttr:
    flags = getattr(op, "fastmath", None)
    if isinstance(flags, arith.FastMathFlagsAttr) and flags.data:
        return llvm.FastMathAttr(tuple(flags.data))
    return llvm.FastMathAttr(None)


def _overflow(op: Operation) -> llvm.OverflowAttr:
    flags = getattr(op, "overflow_flags", None)
    mapping = {"nsw": llvm.OverflowFlag.NO_SIGNED_WRAP, "nuw": llvm.OverflowFlag.NO_UNSIGNED_WRAP}
    if isinstance(flags, arith.IntegerOverflowAttr) and flags.data:
        return llvm.OverflowAttr(tuple(mapping[f.value] for f in flags.data))
    return llvm.OverflowAttr("none")


NSW = llvm.OverflowAttr((llvm.OverflowFlag.NO_SIGNED_WRAP,))


class _Rewrite:
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
        return self.add(_cast(v, want)).results[0]

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
            results.append(new if new.type == old.type else self.result(_cast(new, old.type)))
        self.rewriter.replace(self.op, [], results)

    def refuse(self, why: str) -> LoomError:
        return LoomError(f"{PASS}: cannot lower '{self.op.name}': {why}", self.op)


class _Lowering(RewritePattern):
    """A pattern that lowers the op types in `sources` with `lower(op, rewrite)`."""

    sources: ClassVar[tuple[type[Operation], ...]] = ()

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if isinstance(op, self.sources):
            self.lower(op, _Rewrite(op, rewriter))

    def lower(self, op, r: _Rewrite) -> None:  # noqa: ANN001 - each subclass narrows op
        raise NotImplementedError


def _share_constants(module: ModuleOp) -> None:
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


class _Dispatch(RewritePattern):
    """The lowerings as one pattern that looks each op's type up in a table: one dict
    lookup per op instead of trying every pattern in turn (a faithful conversion, no DCE)."""

    def __init__(self, patterns: Sequence[_Lowering]):
        self.table: dict[type[Operation], _Lowering | None] = {}
        for p in patterns:
            for source in p.sources:
                self.table.setdefault(source, p)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        kind = type(op)
        if kind not in self.table:  # a subclass of a source, or no lowering: looked up once
            self.table[kind] = next((p for t, p in self.table.items() if p and isinstance(op, t)), None)
        if (pattern := self.table[kind]) is not None:
            pattern.lower(op, _Rewrite(op, rewriter))


@dataclass
class _Externals:
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


def _call_intrinsic(r: _Rewrite, name: str, args: Sequence[SSAValue], result: Attribute, fm: llvm.FastMathAttr) -> SSAValue:
    """`llvm.call_intrinsic "<name>"(args)`; `name` is already mangled (llvm.maximum.f32)."""
    call = llvm.CallIntrinsicOp(name, args, [result])
    call.properties["fastmathFlags"] = fm
    return r.result(call)


def _splat(value: float, t: Attribute) -> Attribute:
    if isinstance(t, VectorType):
        return DenseIntOrFPElementsAttr.from_list(t, [value] * t.element_count())
    return FloatAttr(value, t)


# --------------------------------------------------------------------------------------
# func
# --------------------------------------------------------------------------------------


def _convert_block_args(block: Block, op: Operation) -> None:
    """Give `block`'s arguments LLVM types; a cast at the block start keeps the old type
    visible to the ops inside until they are lowered."""
    for arg in list(block.args):
        want = convert_type(arg.type, op)
        if want == arg.type:
            continue
        old_type = arg.type
        new_arg = Rewriter.replace_value_with_new_type(arg, want)
        cast = _cast(new_arg, old_type)
        if block.first_op is not None:
            block.insert_op_before(cast, block.first_op)
        else:
            block.add_op(cast)
        new_arg.replace_uses_with_if(cast.results[0], lambda use: use.operation is not cast)


STATUS = i32  # what a function that may fail returns: 0, or the failed allocation site
ALLOC_SITE = "alloc_site"  # the attribute of an aligned_alloc call: {site, name, type, bytes}


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


class ReturnLowering(_Lowering):
    """func.return → llvm.return; in a function that returns a status (it had no
    results), `llvm.return 0`: success."""

    sources = (func.ReturnOp,)

    def lower(self, op: func.ReturnOp, r: _Rewrite) -> None:
        if len(op.arguments) > 1:
            raise r.refuse("more than one returned value")
        fn = op.parent_op()
        if not op.arguments and isinstance(fn, llvm.FuncOp) and fn.function_type.output == STATUS:
            r.rewriter.replace(op, llvm.ReturnOp(r.const(0, STATUS)), [])
            return
        r.rewriter.replace(op, llvm.ReturnOp(r.value(op.arguments[0]) if op.arguments else None), [])


@dataclass
class CallLowering(_Lowering):
    """func.call → llvm.call; a call of a function that may fail gets its status (checked
    by `_add_failure_paths`)."""

    failing: set[str]
    sources = (func.CallOp,)

    def lower(self, op: func.CallOp, r: _Rewrite) -> None:
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


# --------------------------------------------------------------------------------------
# arith
# --------------------------------------------------------------------------------------


class ConstantLowering(_Lowering):
    sources = (arith.ConstantOp,)

    def lower(self, op: arith.ConstantOp, r: _Rewrite) -> None:
        t = r.type(op.result.type)
        value = op.value
        if isinstance(value, IntegerAttr):
            value = IntegerAttr(value.value.data, t)
        elif isinstance(value, DenseIntOrFPElementsAttr):
            if value.get_type() != t:
                value = DenseIntOrFPElementsAttr.from_list(t, value.get_values())
        elif not isinstance(value, FloatAttr):
            raise r.refuse(f"constant {value} is not an integer, float or dense vector")
        r.replace(r.result(llvm.ConstantOp(value, t)))


_INT_BINARY: dict[type[Operation], type[Operation]] = {
    arith.AddiOp: llvm.AddOp,
    arith.SubiOp: llvm.SubOp,
    arith.MuliOp: llvm.MulOp,
    arith.ShLIOp: llvm.ShlOp,
    arith.DivSIOp: llvm.SDivOp,
    arith.DivUIOp: llvm.UDivOp,
    arith.RemSIOp: llvm.SRemOp,
    arith.RemUIOp: llvm.URemOp,
    arith.AndIOp: llvm.AndOp,
    arith.OrIOp: llvm.OrOp,
    arith.XOrIOp: llvm.XOrOp,
    arith.ShRSIOp: llvm.AShrOp,
    arith.ShRUIOp: llvm.LShrOp,
}


class IntBinaryLowering(_Lowering):
    """addi … shrui → the llvm op of the same name (nsw/nuw flags kept)."""

    sources = tuple(_INT_BINARY)

    def lower(self, op: Operation, r: _Rewrite) -> None:
        target = _INT_BINARY[type(op)]
        lhs, rhs = r.values(op.operands)
        if issubclass(target, llvm.ArithmeticBinOpOverflow):
            new = target(lhs, rhs, overflow=_overflow(op))
        else:
            new = target(lhs, rhs)
        r.replace(r.result(new))


_INT_MINMAX = {arith.MinSIOp: "slt", arith.MaxSIOp: "sgt", arith.MinUIOp: "ult", arith.MaxUIOp: "ugt"}


class IntMinMaxLowering(_Lowering):
    """minsi/maxsi/minui/maxui → icmp + select (vectors: llvm.smin/smax/umin/umax)."""

    sources = tuple(_INT_MINMAX)

    def lower(self, op: Operation, r: _Rewrite) -> None:
        lhs, rhs = r.values(op.operands)
        if isinstance(lhs.type, VectorType):
            name = {"slt": "smin", "sgt": "smax", "ult": "umin", "ugt": "umax"}[_INT_MINMAX[type(op)]]
            r.replace(_call_intrinsic(r, f"llvm.{name}.{mangle(lhs.type)}", [lhs, rhs], lhs.type, llvm.FastMathAttr(None)))
            return
        pred = llvm.ICmpPredicateFlag(_INT_MINMAX[type(op)])
        cmp = r.result(llvm.ICmpOp(lhs, rhs, IntegerAttr(pred.to_int(), i64)))
        r.replace(r.result(llvm.SelectOp(cmp, lhs, rhs)))


class RoundingDivLowering(_Lowering):
    """floordivsi/ceildivsi/ceildivui → div, rem, and a ±1 correction where rem ≠ 0."""

    sources = (arith.FloorDivSIOp, arith.CeilDivSIOp, arith.CeilDivUIOp)

    def lower(self, op: Operation, r: _Rewrite) -> None:
        a, b = r.values(op.operands)
        t = a.type
        if isinstance(t, VectorType):
            raise r.refuse("vector operands are not supported yet")

        def icmp(pred: str, x: SSAValue, y: SSAValue) -> SSAValue:
            return r.result(llvm.ICmpOp(x, y, IntegerAttr(llvm.ICmpPredicateFlag(pred).to_int(), i64)))

        zero, one = r.const(0, t), r.const(1, t)
        if isinstance(op, arith.CeilDivUIOp):
            q, rem = r.result(llvm.UDivOp(a, b)), r.result(llvm.URemOp(a, b))
            r.replace(r.result(llvm.SelectOp(icmp("ne", rem, zero), r.result(llvm.AddOp(q, one)), q)))
            return
        q, rem = r.result(llvm.SDivOp(a, b)), r.result(llvm.SRemOp(a, b))
        inexact = icmp("ne", rem, zero)
        # floor: the exact quotient was negative (signs differ); ceil: it was positive.
        signs_differ = r.result(llvm.XOrOp(icmp("slt", rem, zero), icmp("slt", b, zero)))
        if isinstance(op, arith.FloorDivSIOp):
            adjust, fixed = signs_differ, r.result(llvm.SubOp(q, one))
        else:
            adjust, fixed = r.result(llvm.XOrOp(signs_differ, r.const(-1, i1))), r.result(llvm.AddOp(q, one))
        r.replace(r.result(llvm.SelectOp(r.result(llvm.AndOp(inexact, adjust)), fixed, q)))


_FLOAT_BINARY: dict[type[Operation], type[Operation]] = {
    arith.AddfOp: llvm.FAddOp,
    arith.SubfOp: llvm.FSubOp,
    arith.MulfOp: llvm.FMulOp,
    arith.DivfOp: llvm.FDivOp,
    arith.MaxnumfOp: llvm.VectorFMaxOp,
    arith.MinnumfOp: llvm.VectorFMinOp,
    math.PowFOp: llvm.FPowOp,
    math.CopySignOp: llvm.FCopySignOp,
}

_FLOAT_UNARY: dict[type[Operation], type[Operation]] = {
    arith.NegfOp: llvm.FNegOp,
    math.AbsFOp: llvm.FAbsOp,
    math.CeilOp: llvm.FCeilOp,
    math.FloorOp: llvm.FFloorOp,
    math.SqrtOp: llvm.FSqrtOp,
    math.ExpOp: llvm.FExpOp,
    math.Exp2Op: llvm.FExp2Op,
    math.LogOp: llvm.FLogOp,
    math.Log2Op: llvm.FLog2Op,
    math.SinOp: llvm.FSinOp,
    math.CosOp: llvm.FCosOp,
}


class FloatOpLowering(_Lowering):
    """Elementwise float ops that have an llvm op of their own (fadd, fneg, llvm.intr.sqrt,
    …), fastmath flags carried over."""

    sources = (*_FLOAT_BINARY, *_FLOAT_UNARY, math.FmaOp, vector.FMAOp)

    def lower(self, op: Operation, r: _Rewrite) -> None:
        target = _FLOAT_BINARY.get(type(op)) or _FLOAT_UNARY.get(type(op)) or llvm.FMAOp
        args = r.values(op.operands)
        new = target.create(
            operands=args,
            result_types=[args[0].type],
            properties={"fastmathFlags": _fastmath(op)},
        )
        r.replace(r.result(new))


# Float ops lowered to an llvm.call_intrinsic of an overloaded intrinsic (name.<type>).
_FLOAT_INTRINSICS: dict[type[Operation], str] = {
    arith.MaximumfOp: "llvm.maximum",
    arith.MinimumfOp: "llvm.minimum",
    math.Log10Op: "llvm.log10",
    math.RoundOp: "llvm.round",
    math.RoundEvenOp: "llvm.roundeven",
    math.TruncOp: "llvm.trunc",
    math.TanOp: "llvm.tan",
    math.TanhOp: "llvm.tanh",
    math.SinhOp: "llvm.sinh",
    math.CoshOp: "llvm.cosh",
    math.AsinOp: "llvm.asin",
    math.AcosOp: "llvm.acos",
    math.AtanOp: "llvm.atan",
    math.Atan2Op: "llvm.atan2",
}


class FloatIntrinsicLowering(_Lowering):
    sources = tuple(_FLOAT_INTRINSICS)

    def lower(self, op: Operation, r: _Rewrite) -> None:
        args = r.values(op.operands)
        name = f"{_FLOAT_INTRINSICS[type(op)]}.{mangle(args[0].type)}"
        r.replace(_call_intrinsic(r, name, args, args[0].type, _fastmath(op)))


# Float ops with no LLVM intrinsic: calls to libm (scalars only).
_LIBM: dict[type[Operation], str] = {
    math.ErfOp: "erf",
    math.CbrtOp: "cbrt",
    math.ExpM1Op: "expm1",
    math.Log1pOp: "log1p",
    math.AsinhOp: "asinh",
    math.AcoshOp: "acosh",
    math.AtanhOp: "atanh",
}


@dataclass
class LibmLowering(_Lowering):
    externals: _Externals
    sources = tuple(_LIBM)

    def lower(self, op: Operation, r: _Rewrite) -> None:
        args = r.values(op.operands)
        t = args[0].type
        if not isinstance(t, (Float32Type, Float64Type)):
            raise r.refuse(f"libm has no function for {t}")
        name = _LIBM[type(op)] + ("f" if isinstance(t, Float32Type) else "")
        self.externals.use(name, [t] * len(args), t)
        r.replace(r.result(llvm.CallOp(name, *args, return_type=t)))


class MathMiscLowering(_Lowering):
    """rsqrt (1/sqrt), absi/ctlz/cttz/ctpop (integer intrinsics), fpowi (llvm.powi)."""

    sources = (math.RsqrtOp, math.AbsIOp, math.CountLeadingZerosOp, math.CountTrailingZerosOp, math.CtPopOp, math.FPowIOp)

    def lower(self, op: Operation, r: _Rewrite) -> None:
        args = r.values(op.operands)
        t = args[0].type
        match op:
            case math.RsqrtOp():
                fm = _fastmath(op)
                sqrt = r.result(llvm.FSqrtOp.create(operands=args, result_types=[t], properties={"fastmathFlags": fm}))
                one = r.result(llvm.ConstantOp(_splat(1.0, t), t))
                r.replace(r.result(llvm.FDivOp(one, sqrt, fm)))
            case math.FPowIOp():
                name = f"llvm.powi.{mangle(t)}.{mangle(args[1].type)}"
                r.replace(_call_intrinsic(r, name, args, t, _fastmath(op)))
            case math.CtPopOp():
                r.replace(_call_intrinsic(r, f"llvm.ctpop.{mangle(t)}", args, t, llvm.FastMathAttr(None)))
            case _:
                base = {math.AbsIOp: "llvm.abs", math.CountLeadingZerosOp: "llvm.ctlz", math.CountTrailingZerosOp: "llvm.cttz"}[type(op)]
                poison = r.const(0, i1)  # i1 false: defined result for INT_MIN / zero input
                r.replace(_call_intrinsic(r, f"{base}.{mangle(t)}", [*args, poison], t, llvm.FastMathAttr(None)))


class CmpiLowering(_Lowering):
    sources = (arith.CmpiOp,)

    def lower(self, op: arith.CmpiOp, r: _Rewrite) -> None:
        lhs, rhs = r.values(op.operands)
        pred = llvm.ICmpPredicateFlag(arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data])
        r.replace(r.result(llvm.ICmpOp(lhs, rhs, IntegerAttr(pred.to_int(), i64))))


class CmpfLowering(_Lowering):
    sources = (arith.CmpfOp,)

    def lower(self, op: arith.CmpfOp, r: _Rewrite) -> None:
        lhs, rhs = r.values(op.operands)
        name = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
        if isinstance(lhs.type, VectorType):
            raise r.refuse("vector comparisons are not supported yet")
        if name in ("false", "true"):
            r.replace(r.const(-1 if name == "true" else 0, i1))
            return
        cmp = llvm.FCmpOp(lhs, rhs, name)
        cmp.properties["fastmathFlags"] = _fastmath(op)
        r.replace(r.result(cmp))


class SelectLowering(_Lowering):
    sources = (arith.SelectOp,)

    def lower(self, op: arith.SelectOp, r: _Rewrite) -> None:
        cond, lhs, rhs = r.values(op.operands)  # a vector<Nxi1> condition selects lane by lane
        r.replace(r.result(llvm.SelectOp(cond, lhs, rhs)))


_CASTS: dict[type[Operation], type[Operation]] = {
    arith.SIToFPOp: llvm.SIToFPOp,
    arith.UIToFPOp: UIToFPOp,
    arith.FPToSIOp: FPToSIOp,
    arith.FPToUIOp: FPToUIOp,
    arith.ExtFOp: llvm.FPExtOp,
    arith.TruncFOp: llvm.FPTruncOp,
    arith.ExtSIOp: llvm.SExtOp,
    arith.ExtUIOp: llvm.ZExtOp,
    arith.TruncIOp: llvm.TruncOp,
    arith.BitcastOp: llvm.BitcastOp,
}


def _width(t: Attribute) -> int:
    t = t.element_type if isinstance(t, VectorType) else t
    assert isinstance(t, IntegerType)
    return t.width.data


class CastLowering(_Lowering):
    """sitofp … bitcast → the llvm cast of the same meaning; index_cast → sext/trunc/nothing."""

    sources = (*_CASTS, arith.IndexCastOp)

    def lower(self, op: Operation, r: _Rewrite) -> None:
        (arg,) = r.values(op.operands)
        to = r.type(op.results[0].type)
        if isinstance(op, arith.IndexCastOp):
            src, dst = _width(arg.type), _width(to)
            if src == dst:
                r.replace(arg)
                return
            target = llvm.SExtOp if src < dst else llvm.TruncOp
        else:
            target = _CASTS[type(op)]
        r.replace(r.result(target.create(operands=[arg], result_types=[to])))


# --------------------------------------------------------------------------------------
# cf
# --------------------------------------------------------------------------------------


class BranchLowering(_Lowering):
    sources = (cf.BranchOp, cf.ConditionalBranchOp)

    def lower(self, op: Operation, r: _Rewrite) -> None:
        if isinstance(op, cf.BranchOp):
            new = llvm.BrOp(op.successor, *r.values(op.arguments))
        else:
            assert isinstance(op, cf.ConditionalBranchOp)
            new = llvm.CondBrOp(
                r.value(op.cond),
                op.then_block,
                r.values(op.then_arguments),
                op.else_block,
                r.values(op.else_arguments),
            )
        r.rewriter.replace(op, new, [])


# --------------------------------------------------------------------------------------
# memref
# --------------------------------------------------------------------------------------


def _element_pointer(
    r: _Rewrite, mem: SSAValue, indices: Sequence[SSAValue], *, inbounds: bool = True,
) -> tuple[SSAValue, MemrefLayout]:
    """`getelementptr inbounds T, ptr base, i64 (offset + Σ idx_k·stride_k)` (without
    `inbounds` for an address that may lie outside the memref: a prefetch's)."""
    assert isinstance(mem.type, MemRefType)
    layout = memref_layout(mem.type, r.op)
    base = r.value(mem)
    constant = layout.offset
    terms: list[SSAValue] = []
    for idx, stride in zip(indices, layout.strides, strict=True):
        known = _constant_int(idx)
        if known is not None:
            constant += known * stride
        elif stride != 0:
            v = r.value(idx)
            terms.append(v if stride == 1 else r.result(llvm.MulOp(v, r.const(stride), overflow=NSW)))
    linear: int | SSAValue = constant
    if terms:
        linear = terms[0]
        for t in terms[1:]:
            linear = r.result(llvm.AddOp(linear, t, overflow=NSW))
        if constant:
            linear = r.result(llvm.AddOp(linear, r.const(constant), overflow=NSW))
    elif not -(2**31) <= constant < 2**31:  # GEP's constant indices are i32
        linear = r.const(constant)
    gep = llvm.GEPOp.from_mixed_indices(base, [linear], layout.element_type, inbounds=inbounds)
    return r.result(gep), layout


def _offset_pointer(r: _Rewrite, ptr: SSAValue, delta: int, element: Attribute) -> SSAValue:
    if delta == 0:
        return ptr
    return r.result(llvm.GEPOp.from_mixed_indices(ptr, [delta], element, inbounds=True))


class LoadStoreLowering(_Lowering):
    sources = (memref.LoadOp, memref.StoreOp)

    def lower(self, op: Operation, r: _Rewrite) -> None:
        if isinstance(op, memref.LoadOp):
            ptr, layout = _element_pointer(r, op.memref, op.indices)
            r.replace(r.result(llvm.LoadOp(ptr, layout.element_type, alignment=_scalar_bytes(layout.element_type))))
        else:
            assert isinstance(op, memref.StoreOp)
            ptr, layout = _element_pointer(r, op.memref, op.indices)
            store = llvm.StoreOp(r.value(op.value), ptr, alignment=_scalar_bytes(layout.element_type))
            r.rewriter.replace(op, store, [])


class PrefetchLowering(_Lowering):
    """loom.prefetch → llvm.prefetch.p0(ptr, rw, locality, 1 = data cache)."""

    sources = (PrefetchOp,)

    def lower(self, op: PrefetchOp, r: _Rewrite) -> None:
        ptr, _ = _element_pointer(r, op.memref, op.indices, inbounds=False)
        flags = [int(bool(op.is_write.value.data)), op.locality.value.data, 1]
        args = [ptr, *(r.result(llvm.ConstantOp(IntegerAttr(f, i32), i32)) for f in flags)]
        r.rewriter.replace(op, llvm.CallIntrinsicOp("llvm.prefetch.p0", args, []), [])


HEAP_ALIGNMENT = 64


def _heap_bytes(layout: MemrefLayout, align: int) -> int:
    """The bytes a heap buffer of `layout` takes: at least 1, rounded up to `align`."""
    nbytes = layout.extent() * layout.element_bytes()
    return min((max(nbytes, 1) + align - 1) // align * align, I64_MAX)  # memref_layout: size <= I64_MAX


@dataclass
class AllocLowering(_Lowering):
    """alloc → aligned_alloc(64, size rounded up to 64), tagged with its site number, name,
    type and size in bytes (`ALLOC_SITE`) for the runtime's message should it fail;
    dealloc → free; alloca → llvm.alloca."""

    externals: _Externals
    sites: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    sources = (memref.AllocOp, memref.AllocaOp, memref.DeallocOp)

    def lower(self, op: Operation, r: _Rewrite) -> None:
        ptr = llvm.LLVMPointerType()
        if isinstance(op, memref.DeallocOp):
            size = _heap_bytes(memref_layout(op.memref.type, op), HEAP_ALIGNMENT)
            if size >= pool.MIN_BYTES:  # parked for the next call (compiler/jit/pool.py)
                self.externals.use("loom_give", [ptr, i64], llvm.LLVMVoidType())
                r.rewriter.replace(op, llvm.CallOp("loom_give", r.value(op.memref), r.const(size)), [])
                return
            self.externals.use("free", [ptr], llvm.LLVMVoidType())
            r.rewriter.replace(op, llvm.CallOp("free", r.value(op.memref)), [])
            return
        assert isinstance(op, (memref.AllocOp, memref.AllocaOp))
        layout = memref_layout(op.memref.type, op)
        align = max(HEAP_ALIGNMENT, op.alignment.value.data if op.alignment else 0)
        if isinstance(op, memref.AllocaOp):
            count = r.const(max(layout.extent(), 1))
            r.replace(r.result(llvm.AllocaOp(count, layout.element_type, alignment=align)))
            return
        nbytes = layout.extent() * layout.element_bytes()
        size = _heap_bytes(layout, align)
        # pooled: 64-byte aligned (every parked buffer is), large enough to be worth it
        allocator = "loom_take" if align == HEAP_ALIGNMENT and size >= pool.MIN_BYTES else "aligned_alloc"
        self.externals.use(allocator, [i64, i64], ptr)
        call = llvm.CallOp(allocator, r.const(align), r.const(size), return_type=ptr)
        site = {"site": IntegerAttr(next(self.sites), STATUS), "name": StringAttr(op.memref.name_hint or ""),
                "type": op.memref.type, "bytes": IntegerAttr(nbytes, i64)}
        call.attributes[ALLOC_SITE] = DictionaryAttr(site)
        call.location = op.location
        r.replace(r.result(call))


class ViewLowering(_Lowering):
    """Views of a static buffer: the same base pointer (moved only if the result type's
    offset is not the offset the view implies)."""

    sources = (
        memref.SubviewOp,
        memref.ReinterpretCastOp,
        memref.CastOp,
        memref.CollapseShapeOp,
        memref.ExpandShapeOp,
        memref.AssumeAlignmentOp,
    )

    def lower(self, op: Operation, r: _Rewrite) -> None:
        source = op.operands[0]
        result = op.results[0]
        if not isinstance(source.type, MemRefType) or not isinstance(result.type, MemRefType):
            raise r.refuse("unranked memrefs are not supported")
        src = memref_layout(source.type, op)
        dst = memref_layout(result.type, op)
        if isinstance(op, memref.SubviewOp):
            if op.offsets or op.sizes or op.strides:
                raise r.refuse("dynamic offsets, sizes or strides")
            offsets = op.static_offsets.get_values()
            implied = src.offset + sum(o * s for o, s in zip(offsets, src.strides))
        elif isinstance(op, memref.ReinterpretCastOp):
            if op.offsets or op.sizes or op.strides:
                raise r.refuse("dynamic offsets, sizes or strides")
            implied = op.static_offsets.get_values()[0]  # relative to the source's base
        else:
            implied = src.offset
        r.replace(_offset_pointer(r, r.value(source), implied - dst.offset, dst.element_type))


class DimLowering(_Lowering):
    sources = (memref.DimOp,)

    def lower(self, op: memref.DimOp, r: _Rewrite) -> None:
        if not isinstance(op.source.type, MemRefType):
            raise r.refuse("unranked memrefs are not supported")
        layout = memref_layout(op.source.type, op)
        index = _constant_int(op.index)
        if index is None or not 0 <= index < len(layout.shape):
            raise r.refuse("the dimension index must be a constant in range")
        r.replace(r.const(layout.shape[index]))


# --------------------------------------------------------------------------------------
# vector (1-D, what loom-vectorize emits)
# --------------------------------------------------------------------------------------


def _vector_pointer(r: _Rewrite, mem: SSAValue, indices: Sequence[SSAValue]) -> tuple[SSAValue, MemrefLayout]:
    """The address of a vector's first element; its lanes are the next elements of the
    last dimension, which must then have stride 1."""
    ptr, layout = _element_pointer(r, mem, indices)
    if not layout.strides or layout.strides[-1] != 1:
        raise r.refuse(f"the last dimension of {mem.type} is not contiguous")
    return ptr, layout


class VectorLoadStoreLowering(_Lowering):
    """vector.load/store → llvm.load/store of the vector type at the first element,
    aligned to the element only (numpy buffers are only element-aligned)."""

    sources = (vector.LoadOp, vector.StoreOp)

    def lower(self, op: Operation, r: _Rewrite) -> None:
        if isinstance(op, vector.LoadOp):
            ptr, layout = _vector_pointer(r, op.base, op.indices)
            r.replace(r.result(llvm.LoadOp(ptr, r.type(op.result.type), alignment=layout.element_bytes())))
        else:
            assert isinstance(op, vector.StoreOp)
            ptr, layout = _vector_pointer(r, op.base, op.indices)
            r.rewriter.replace(op, llvm.StoreOp(r.value(op.vector), ptr, alignment=layout.element_bytes()), [])


class MaskedLoadStoreLowering(_Lowering):
    """vector.maskedload/maskedstore → llvm.intr.masked.load/store at the first element
    (element-aligned); lanes off in the mask are not touched."""

    sources = (vector.MaskedLoadOp, vector.MaskedStoreOp)

    def lower(self, op: Operation, r: _Rewrite) -> None:
        if isinstance(op, vector.MaskedLoadOp):
            ptr, layout = _vector_pointer(r, op.base, op.indices)
            load = MaskedLoadOp(ptr, r.value(op.mask), r.value(op.pass_thru), layout.element_bytes())
            r.replace(r.result(load))
            return
        assert isinstance(op, vector.MaskedStoreOp)
        value = r.value(op.value_to_store)
        if not isinstance(value.type.element_type, _FLOATS):  # type: ignore[union-attr]
            raise r.refuse(f"xDSL's llvm.intr.masked.store takes float vectors only, got {value.type}")
        ptr, layout = _vector_pointer(r, op.base, op.indices)
        r.rewriter.replace(op, llvm.MaskedStoreOp(value, ptr, r.value(op.mask), layout.element_bytes()), [])


def _constant_lanes(mask: SSAValue) -> int | None:
    """How many lanes `vector.create_mask %n` turns on when %n is a constant (clamped to
    0..width), else None."""
    create = mask.owner
    if not isinstance(create, vector.CreateMaskOp) or len(create.mask_dim_sizes) != 1:
        return None
    bound = create.mask_dim_sizes[0].owner
    if not isinstance(bound, arith.ConstantOp) or not isinstance(bound.value, IntegerAttr):
        return None
    width = mask.type.element_count()  # type: ignore[union-attr]
    return min(max(bound.value.value.data, 0), width)


class FoldConstantMask(RewritePattern):
    """A vector.maskedload/maskedstore whose mask is `vector.create_mask` of a constant:
    no lane on reads nothing (the pass-through) and stores nothing; every lane on is a
    plain vector.load/store; one lane on is a scalar memref.load/store of lane 0. Run
    before the lowering, as MLIR's canonicalization folds all-true and all-false masks.
    The one-lane case is the remainder of a vectorized loop one past a multiple of the
    width: as a 1-lane llvm.intr.masked.store, LLVM's x86 code generation time grew as
    the 3.7th power of their count in a block (89 s for a batched 4x64x17 f64 matmul's
    zero fill and epilogue, 0.2 s as scalar stores)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: vector.MaskedLoadOp | vector.MaskedStoreOp, rewriter: PatternRewriter) -> None:
        mask = op.mask
        lanes = _constant_lanes(mask)
        if lanes is None:
            return
        width = mask.type.element_count()  # type: ignore[union-attr]
        if isinstance(op, vector.MaskedLoadOp):
            if lanes == 0:
                rewriter.replace(op, [], [op.pass_thru])
            elif lanes == width:
                rewriter.replace(op, vector.LoadOp(op.base, op.indices, op.result.type))
            elif lanes == 1:
                load = memref.LoadOp.get(op.base, op.indices)
                rewriter.replace(op, [load, vector.InsertOp(load.res, op.pass_thru, [0])])
            else:
                return
        elif lanes == 0:
            rewriter.erase(op)
        elif lanes == width:
            rewriter.replace(op, vector.StoreOp(op.value_to_store, op.base, op.indices))
        elif lanes == 1:
            element = op.value_to_store.type.element_type  # type: ignore[union-attr]
            lane = vector.ExtractOp(op.value_to_store, [0], element)
            rewriter.replace(op, [lane, memref.StoreOp.get(lane.result, op.base, op.indices)])
        else:
            return
        if not mask.uses:
            rewriter.erase(mask.owner)  # type: ignore[arg-type]


def _broadcast(r: _Rewrite, scalar: SSAValue, t: VectorType) -> SSAValue:
    """A vector with `scalar` in every lane: insertelement into lane 0, then a
    shufflevector of lane 0 (LLVM's splat idiom)."""
    undef = r.result(llvm.UndefOp(t))
    lane0 = r.result(llvm.InsertElementOp(undef, scalar, r.const(0, i32)))
    zeros = DenseArrayBase.from_list(i32, [0] * t.element_count())
    return r.result(llvm.ShuffleVectorOp(lane0, undef, zeros, t))


class BroadcastLowering(_Lowering):
    sources = (vector.BroadcastOp,)

    def lower(self, op: vector.BroadcastOp, r: _Rewrite) -> None:
        t = r.type(op.vector.type)
        assert isinstance(t, VectorType)
        source = r.value(op.source)
        if source.type == t:
            r.replace(source)
        elif isinstance(source.type, VectorType):
            raise r.refuse(f"broadcasting {source.type} to {t}")
        else:
            r.replace(_broadcast(r, source, t))


class CreateMaskLowering(_Lowering):
    """vector.create_mask %n → icmp slt <0, 1, ..., w-1>, splat(%n): lanes below n are
    on (none for n <= 0, all for n >= w)."""

    sources = (vector.CreateMaskOp,)

    def lower(self, op: vector.CreateMaskOp, r: _Rewrite) -> None:
        if len(op.mask_dim_sizes) != 1:
            raise r.refuse("only 1-D masks are supported")
        width = r.type(op.mask_vector.type).element_count()  # type: ignore[union-attr]
        lanes_type = VectorType(i64, [width])
        lanes = r.result(llvm.ConstantOp(DenseIntOrFPElementsAttr.from_list(lanes_type, list(range(width))), lanes_type))
        bound = _broadcast(r, r.value(op.mask_dim_sizes[0]), lanes_type)
        slt = IntegerAttr(llvm.ICmpPredicateFlag("slt").to_int(), i64)
        r.replace(r.result(llvm.ICmpOp(lanes, bound, slt)))


class ReductionLowering(_Lowering):
    """vector.reduction <add> on floats → llvm.intr.vector.reduce.fadd(start, v), the
    start being the accumulator operand (or -0.0). The op's fastmath flags carry over:
    with `reassoc` LLVM sums as a tree, without it strictly in lane order."""

    sources = (vector.ReductionOp,)

    def lower(self, op: vector.ReductionOp, r: _Rewrite) -> None:
        if op.kind.data != vector.CombiningKindFlag.ADD:
            raise r.refuse(f"<{op.kind.data}> reductions are not supported (only <add>)")
        v = r.value(op.vector)
        element = v.type.element_type  # type: ignore[union-attr]
        if not isinstance(element, _FLOATS):
            raise r.refuse(f"only float reductions are supported, got {v.type}")
        start = r.value(op.acc) if op.acc is not None else r.result(llvm.ConstantOp(FloatAttr(-0.0, element), element))
        r.replace(r.result(llvm.VectorReduceFAddOp(start, v, _fastmath(op))))


def _static_lane(r: _Rewrite, op: vector.ExtractOp | vector.InsertOp) -> int:
    positions = op.static_position.get_values()
    if op.dynamic_position or len(positions) != 1:
        raise r.refuse("only one static position in a 1-D vector is supported")
    return positions[0]


class LaneLowering(_Lowering):
    """vector.extract/insert of one lane → llvm.extractelement/insertelement;
    vector.shuffle → llvm.shufflevector."""

    sources = (vector.ExtractOp, vector.InsertOp, vector.ShuffleOp)

    def lower(self, op: Operation, r: _Rewrite) -> None:
        if isinstance(op, vector.ExtractOp):
            lane = r.const(_static_lane(r, op))
            r.replace(r.result(ExtractElementOp(r.value(op.vector), lane)))
        elif isinstance(op, vector.InsertOp):
            lane = r.const(_static_lane(r, op))
            r.replace(r.result(llvm.InsertElementOp(r.value(op.dest), r.value(op.source), lane)))
        else:
            assert isinstance(op, vector.ShuffleOp)
            v1, v2 = r.value(op.v1), r.value(op.v2)
            result = r.type(op.result.type)
            if any(isinstance(v.type, VectorType) and v.type.get_num_dims() != 1 for v in (v1, v2)):
                raise r.refuse("only 1-D shuffles are supported")
            mask = DenseArrayBase.from_list(i32, list(op.mask.get_values()))
            r.replace(r.result(llvm.ShuffleVectorOp(v1, v2, mask, result)))


# --------------------------------------------------------------------------------------
# The pass
# --------------------------------------------------------------------------------------


def _reconcile_casts(module: ModuleOp) -> None:
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

    def __init__(self, fn: llvm.FuncOp, buffers: list[SSAValue], externals: _Externals):
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


def _add_failure_paths(module: ModuleOp, failing: set[str], externals: _Externals) -> None:
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


def _refuse_leftovers(module: ModuleOp) -> None:
    for op in module.walk():
        if op is module or isinstance(op, UnrealizedConversionCastOp) or op.name.startswith("llvm."):
            continue
        raise LoomError(f"{PASS}: no lowering to the llvm dialect for '{op.name}'", op)


@dataclass(frozen=True)
class LoomConvertToLLVMPass(ModulePass):
    """Lower func/arith/math/cf/memref to the llvm dialect (GEP-based, noalias memrefs)."""

    name = "loom-convert-to-llvm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        scf_op = next((o for o in op.walk() if o.name.startswith("scf.")), None)
        if scf_op is not None:
            raise LoomError(f"{PASS}: run convert-scf-to-cf first ('{scf_op.name}' is still here)", scf_op)
        externals = _Externals()
        failing = failing_functions(op)
        _share_constants(op)
        PatternRewriteWalker(FoldConstantMask()).rewrite_module(op)
        PatternRewriteWalker(FuncLowering(failing), apply_recursively=False).rewrite_module(op)
        patterns: list[_Lowering] = [
            ReturnLowering(),
            CallLowering(failing),
            ConstantLowering(),
            IntBinaryLowering(),
            IntMinMaxLowering(),
            RoundingDivLowering(),
            FloatOpLowering(),
            FloatIntrinsicLowering(),
            LibmLowering(externals),
            MathMiscLowering(),
            CmpiLowering(),
            CmpfLowering(),
            SelectLowering(),
            CastLowering(),
            BranchLowering(),
            LoadStoreLowering(),
            PrefetchLowering(),
            AllocLowering(externals),
            ViewLowering(),
            DimLowering(),
            VectorLoadStoreLowering(),
            MaskedLoadStoreLowering(),
            BroadcastLowering(),
            CreateMaskLowering(),
            ReductionLowering(),
            LaneLowering(),
        ]
        PatternRewriteWalker(_Dispatch(patterns), apply_recursively=False).rewrite_module(op)
        _refuse_leftovers(op)
        _reconcile_casts(op)
        for const in [o for o in op.walk(reverse=True) if isinstance(o, llvm.ConstantOp)]:
            if not const.result.uses:  # folded into addresses (constant indices, memref.dim)
                Rewriter.erase_op(const)
        _add_failure_paths(op, failing, externals)
        externals.declare_in(op)


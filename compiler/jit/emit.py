"""llvm dialect → LLVM IR text, through llvmlite.ir.

This reuses xDSL's emitter (xdsl.backend.llvm: `convert_type`, `convert_op`, the function
declaration with its argument attributes, globals) and extends it where it falls short
for Loom, without forking it:

* ops xDSL's llvm dialect or emitter lacks: fptosi/fptoui/uitofp, extractelement,
  masked.load (the ops of dialects/llvm_ext.py, matched by name), and ops it emits in a
  form LLVM 22 rejects or misreads: masked.store (unmangled name), vector.reduce.fadd
  (fastmath flags dropped);
* fastmath flags on intrinsics (fma, sqrt, maxnum, …, llvm.call_intrinsic) and fcmp, and
  intrinsic names mangled by type (`llvm.fabs.v8f32`), so that scalar and vector uses of
  one intrinsic can share a module;
* getelementptr on opaque pointers without xDSL's pointer bitcast;
* function linkage and attributes: `no_unwind`, `no_inline`, `optimize_none`,
  `passthrough`, `target_cpu`/`target_features`/`tune_cpu`, `frame_pointer`;
* blocks converted in dominance order, so phi operands from later blocks resolve; a
  conditional branch to one block on both edges gets a block on its false edge.

Every op is tried against Loom's handlers first and falls back to xDSL's `convert_op`.
`to_llvm_ir(module)` is the entry point; `LoomLLVMTarget` is the `-t llvm` target of
loom-opt.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

import llvmlite.ir as ir
from llvmlite import binding
from xdsl.backend.llvm.convert import _convert_global, _declare_func
from xdsl.backend.llvm.convert_op import convert_op
from xdsl.backend.llvm.convert_type import convert_type
from xdsl.context import Context
from xdsl.dialects import llvm
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.utils.exceptions import LLVMTranslationException
from xdsl.utils.target import Target

from compiler.jit.engine import assembly
from passes.conversion.to_llvm.x86vector import BFLOAT_OPERANDS
from passes.support.diagnostics import LoomError
from passes.support.session import session

ValueMap = dict[SSAValue, ir.Value]
Handler = Callable[[Operation, ir.IRBuilder, ValueMap], None]

# --------------------------------------------------------------------------------------
# Op handlers Loom adds (by op name)
# --------------------------------------------------------------------------------------


def _suffix(t: ir.Type) -> str:
    """Type suffix of an overloaded intrinsic: f32, v8f32, i64."""
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_suffix(t.element)}"
    if isinstance(t, ir.PointerType):
        return f"p{t.addrspace}"
    return t.intrinsic_name


def _fastmath(op: Operation) -> list[str]:
    flags = op.properties.get("fastmathFlags")
    return [f.value for f in flags.data] if isinstance(flags, llvm.FastMathAttr) else []


def _is_float(t: ir.Type) -> bool:
    t = t.element if isinstance(t, ir.VectorType) else t
    return isinstance(t, (ir.HalfType, ir.FloatType, ir.DoubleType))


def _call_intrinsic(builder: ir.IRBuilder, name: str, args: list[ir.Value], ret: ir.Type, flags: list[str]) -> ir.Value:
    module = builder.module
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, [a.type for a in args]), name=name)
    return builder.call(fn, args, fastmath=flags if _is_float(ret) else ())


def _intrinsic_op(op: Operation, builder: ir.IRBuilder, vals: ValueMap) -> None:
    """llvm.intr.<name> ops (fma, fabs, sqrt, maxnum, …) with fastmath flags, mangled."""
    ret = convert_type(op.results[0].type)
    name = op.name.replace("llvm.intr.", "llvm.", 1) + "." + _suffix(ret)
    vals[op.results[0]] = _call_intrinsic(builder, name, [vals[v] for v in op.operands], ret, _fastmath(op))


class _BFloat(ir.Type):
    """LLVM's `bfloat` (llvmlite.ir has none): only ever the element of a bitcast's
    vector, for the operands of the bf16 dot-product intrinsics."""

    def _to_string(self) -> str:
        return "bfloat"


_BFLOAT = _BFloat()  # one instance: llvmlite compares the types of a call's arguments by identity


def _call_intrinsic_op(op: Operation, builder: ir.IRBuilder, vals: ValueMap) -> None:
    assert isinstance(op, llvm.CallIntrinsicOp)
    if op.op_bundle_operands:
        raise NotImplementedError("operand bundles are not supported")
    ret = convert_type(op.ress.type) if op.ress is not None else ir.VoidType()
    args = [vals[v] for v in op.args]
    for i in BFLOAT_OPERANDS.get(op.intrin.data, ()):  # bf16 is i16 in Loom's IR
        args[i] = builder.bitcast(args[i], ir.VectorType(_BFLOAT, args[i].type.count))
    result = _call_intrinsic(builder, op.intrin.data, args, ret, _fastmath(op))
    if op.ress is not None:
        vals[op.ress] = result


def _fcmp(op: Operation, builder: ir.IRBuilder, vals: ValueMap) -> None:
    assert isinstance(op, llvm.FCmpOp)
    pred = llvm.FCmpPredicateFlag.from_int(op.predicate.value.data).value.lstrip("_")
    vals[op.res] = builder.fcmp_ordered(pred, vals[op.lhs], vals[op.rhs], flags=_fastmath(op))


def _gep(op: Operation, builder: ir.IRBuilder, vals: ValueMap) -> None:
    assert isinstance(op, llvm.GEPOp)
    dynamic = iter(op.ssa_indices)
    indices = [
        vals[next(dynamic)] if i == llvm.GEP_USE_SSA_VAL else ir.Constant(ir.IntType(32), i)
        for i in op.rawConstantIndices.iter_values()
    ]
    vals[op.result] = builder.gep(
        vals[op.ptr], indices, inbounds=op.inbounds is not None, source_etype=convert_type(op.elem_type)
    )


def _cast(method: str) -> Handler:
    def handler(op: Operation, builder: ir.IRBuilder, vals: ValueMap) -> None:
        vals[op.results[0]] = getattr(builder, method)(vals[op.operands[0]], convert_type(op.results[0].type))

    return handler


def _extractelement(op: Operation, builder: ir.IRBuilder, vals: ValueMap) -> None:
    vals[op.results[0]] = builder.extract_element(vals[op.operands[0]], vals[op.operands[1]])


def _masked_memory(op: Operation, builder: ir.IRBuilder, vals: ValueMap) -> None:
    """llvm.intr.masked.load (ptr, mask, passthru) and masked.store (value, ptr, mask):
    LLVM 22's form, the alignment an `align` attribute of the pointer argument. (xDSL's
    emitter declares the store unmangled, with LLVM's old i32 alignment argument.)"""
    args = [vals[v] for v in op.operands]
    is_load = op.name == "llvm.intr.masked.load"
    pointer = 0 if is_load else 1
    data_type = args[2].type if is_load else args[0].type
    ret = data_type if is_load else ir.VoidType()
    name = f"llvm.masked.{'load' if is_load else 'store'}.{_suffix(data_type)}.{_suffix(args[pointer].type)}"
    fn = builder.module.globals.get(name)
    if fn is None:
        fn = ir.Function(builder.module, ir.FunctionType(ret, [a.type for a in args]), name=name)
    call = builder.call(fn, args)
    call.arg_attributes[pointer] = ir.values.ArgumentAttributes()
    call.arg_attributes[pointer].align = op.properties["alignment"].value.data  # type: ignore[union-attr]
    if is_load:
        vals[op.results[0]] = call


def _reduce_fadd(op: Operation, builder: ir.IRBuilder, vals: ValueMap) -> None:
    """llvm.intr.vector.reduce.fadd with its fastmath flags (xDSL's emitter drops them,
    and without `reassoc` the sum is sequential, lane after lane)."""
    start, vec = (vals[v] for v in op.operands)
    name = f"llvm.vector.reduce.fadd.{_suffix(vec.type)}"
    vals[op.results[0]] = _call_intrinsic(builder, name, [start, vec], start.type, _fastmath(op))


_INTRINSIC_OPS = (
    "fma fabs ceil floor sqrt exp exp2 log log2 sin cos pow copysign maxnum minnum"
).split()

LOOM_HANDLERS: dict[str, Handler] = {
    **{f"llvm.intr.{name}": _intrinsic_op for name in _INTRINSIC_OPS},
    "llvm.call_intrinsic": _call_intrinsic_op,
    "llvm.fcmp": _fcmp,
    "llvm.getelementptr": _gep,
    "llvm.fptosi": _cast("fptosi"),
    "llvm.fptoui": _cast("fptoui"),
    "llvm.uitofp": _cast("uitofp"),
    "llvm.extractelement": _extractelement,
    "llvm.intr.masked.load": _masked_memory,
    "llvm.intr.masked.store": _masked_memory,
    "llvm.intr.vector.reduce.fadd": _reduce_fadd,
}

# --------------------------------------------------------------------------------------
# Functions
# --------------------------------------------------------------------------------------


class _FunctionAttributes(ir.values.FunctionAttributes):
    """llvmlite's function attributes, plus `"key"="value"` string attributes and flags
    llvmlite does not list (LLVM's parser checks them)."""

    def __init__(self) -> None:
        super().__init__()
        self.strings: dict[str, str] = {}

    def add(self, name: str) -> None:
        set.add(self, name)

    def __bool__(self) -> bool:
        return len(self) > 0 or bool(self.strings)

    def _to_list(self, ret_type: ir.Type) -> list[str]:
        return [*super()._to_list(ret_type), *(f'"{k}"="{v}"' for k, v in sorted(self.strings.items()))]


_RESULT_FLAGS = {"llvm.noalias": "noalias", "llvm.nonnull": "nonnull", "llvm.noundef": "noundef"}


def _declare(op: llvm.FuncOp, module: ir.Module) -> ir.Function:
    """xDSL's declaration (types, argument attributes) plus linkage and function attributes."""
    _declare_func(op, module)
    fn = module.get_global(op.sym_name.data)
    assert isinstance(fn, ir.Function)
    linkage = op.linkage.linkage.data
    if linkage != "external":
        fn.linkage = linkage
    if op.CConv.convention.data != "ccc":
        fn.calling_convention = op.CConv.convention.data
    attrs = fn.attributes = _FunctionAttributes()

    def get(name: str) -> Attribute | None:
        # A property when built by a pass; an attribute when parsed from `attributes {…}`.
        return op.properties.get(name, op.attributes.get(name))

    if get("no_unwind") is not None:
        attrs.add("nounwind")
    if get("no_inline") is not None:
        attrs.add("noinline")
    if get("optimize_none") is not None:
        attrs.add("optnone")
        attrs.add("noinline")
    passthrough = get("passthrough")
    for entry in passthrough.data if isinstance(passthrough, ArrayAttr) else ():
        if isinstance(entry, StringAttr):
            attrs.add(entry.data)
        elif isinstance(entry, ArrayAttr) and len(entry.data) == 2:
            key, value = entry.data
            assert isinstance(key, StringAttr) and isinstance(value, StringAttr)
            attrs.strings[key.data] = value.data
    for name, key in (("target_cpu", "target-cpu"), ("tune_cpu", "tune-cpu")):
        if isinstance(value := get(name), StringAttr):
            attrs.strings[key] = value.data
    if isinstance(features := get("target_features"), llvm.TargetFeaturesAttr):
        attrs.strings["target-features"] = ",".join(f.data for f in features.features)
    if isinstance(frame_pointer := get("frame_pointer"), llvm.FramePointerKindAttr):
        attrs.strings["frame-pointer"] = str(frame_pointer.data.value)
    if op.res_attrs is not None and op.res_attrs.data:
        for name in op.res_attrs.data[0].data:
            if name in _RESULT_FLAGS:
                fn.return_value.attributes.add(_RESULT_FLAGS[name])
    return fn


def _dominance_order(blocks: list[Block]) -> list[Block]:
    """Blocks in reverse post-order from the entry (every block after its dominators),
    then any unreachable blocks."""
    seen: set[Block] = set()
    post: list[Block] = []
    stack: list[tuple[Block, int]] = [(blocks[0], 0)]
    seen.add(blocks[0])
    while stack:
        block, i = stack.pop()
        succs = block.last_op.successors if block.last_op is not None else ()
        if i < len(succs):
            stack.append((block, i + 1))
            nxt = succs[i]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, 0))
        else:
            post.append(block)
    order = post[::-1]
    return order + [b for b in blocks if b not in seen]


def _define(op: llvm.FuncOp, fn: ir.Function) -> None:
    blocks = list(op.body.blocks)
    block_map = {b: fn.append_basic_block(name=b.name_hint or ("entry" if i == 0 else f"bb{i}")) for i, b in enumerate(blocks)}
    vals: ValueMap = dict(zip(blocks[0].args, fn.args))
    for arg, llvm_arg in zip(blocks[0].args, fn.args):
        _name(llvm_arg, arg)
    for block in blocks[1:]:  # block arguments are phis; branches add the incoming values
        phi_builder = ir.IRBuilder(block_map[block])
        for arg in block.args:
            vals[arg] = phi_builder.phi(convert_type(arg.type), name=arg.name_hint or "")
    for block in _dominance_order(blocks):
        builder = ir.IRBuilder(block_map[block])
        for inner in block.ops:
            try:
                handler = LOOM_HANDLERS.get(inner.name)
                if handler is not None:
                    handler(inner, builder, vals)
                elif isinstance(inner, llvm.CondBrOp) and inner.then_block is inner.else_block:
                    _cond_br_to_one_block(inner, builder, vals, block_map)
                else:
                    convert_op(inner, builder, vals, block_map)
            except (NotImplementedError, LLVMTranslationException, KeyError, TypeError) as e:
                raise LoomError(f"cannot emit '{inner.name}' as LLVM IR: {e}", inner) from None
            for result in inner.results:
                _name(vals.get(result), result)


def _cond_br_to_one_block(op: llvm.CondBrOp, builder: ir.IRBuilder, vals: ValueMap,
                          block_map: dict[Block, ir.Block]) -> None:
    """`llvm.cond_br %c, ^b(%x), ^b(%y)`: a phi takes one value per predecessor block, so
    the false edge goes through a block of its own (MLIR's `ensureDistinctSuccessors`)."""
    join = block_map[op.then_block]
    edge = builder.function.append_basic_block(name=f"{join.name}.else")
    for arg, then_value, else_value in zip(op.then_block.args, op.then_arguments, op.else_arguments):
        vals[arg].add_incoming(vals[then_value], builder.block)
        vals[arg].add_incoming(vals[else_value], edge)
    builder.cbranch(vals[op.cond], join, edge)
    ir.IRBuilder(edge).branch(join)


def _name(value: ir.Value | None, source: SSAValue) -> None:
    """Carry the SSA name hint (%i, %A) over to the LLVM value, for readable IR."""
    auto_named = isinstance(value, (ir.Argument, ir.Instruction)) and value.name.startswith(".")
    if source.name_hint and auto_named:
        value.name = source.name_hint


# --------------------------------------------------------------------------------------
# Module
# --------------------------------------------------------------------------------------


def to_llvmlite_module(module: ModuleOp) -> ir.Module:
    """The llvmlite.ir module of an llvm-dialect module (llvm.func and llvm.mlir.global only)."""
    out = ir.Module(name="loom")
    triple = module.attributes.get("llvm.target_triple")
    if triple is not None:
        out.triple = triple.data if isinstance(triple, StringAttr) else str(triple)
    else:
        out.triple = binding.get_default_triple()
    funcs: list[llvm.FuncOp] = []
    for op in module.ops:
        if isinstance(op, llvm.GlobalOp):
            _convert_global(op, out)
        elif isinstance(op, llvm.FuncOp):
            funcs.append(op)
        else:
            raise LoomError(f"cannot emit '{op.name}' as LLVM IR: lower it to the llvm dialect first (loom-convert-to-llvm)", op)
    declared = [(op, _declare(op, out)) for op in funcs]
    for op, fn in declared:
        if op.body.blocks:
            _define(op, fn)
    return out


def to_llvm_ir(module: ModuleOp) -> str:
    """LLVM IR text of an llvm-dialect module, verified and printed by LLVM itself (so it
    reads like clang's: `define void @f(ptr noalias captures(none) %A)`)."""
    with session():  # the garbage collector paused: see passes/support/session.py
        text = str(to_llvmlite_module(module))
    try:  # a private context: LLVM's global one belongs to the JIT (compiler/jit/engine.py)
        parsed = binding.parse_assembly(text, context=binding.create_context())
        parsed.verify()
    except RuntimeError as e:
        raise LoomError(f"internal error: the emitted LLVM IR is invalid: {str(e).strip()}") from None
    return str(parsed)


@dataclass(frozen=True)
class LoomLLVMTarget(Target):
    """`loom-opt -t llvm`: print the module as LLVM IR."""

    name = "llvm"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        print(to_llvm_ir(module), file=output)


@dataclass(frozen=True)
class LoomAsmTarget(Target):
    """`loom-opt -t asm`: the host's assembly of an llvm-dialect module, optimized at O3
    and compiled for the host CPU as `compile()` does (`kernel.asm()`), with no engine
    and no linking: a listing needs neither."""

    name = "asm"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        print(assembly(to_llvm_ir(module)), file=output)


@dataclass(frozen=True)
class LoomX86AsmTarget(LoomAsmTarget):
    """`loom-opt -t x86-asm` (offered on an x86-64 host): the same as `asm`."""

    name = "x86-asm"

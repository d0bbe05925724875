"""From loom IR to a Kernel: what compile() runs when neither of its caches has the kernel.

    source text or module --parse--> loom IR --pipeline--> llvm dialect
        --emit--> LLVM IR --JIT (O3, host CPU)--> machine code --> Kernel

    load_module(source) -> ModuleOp        parsed (or cloned) and verified
    find_entry(module, entry) -> FuncOp    the function to run
    signature(fn) -> (inputs, outputs)     the kernel's arrays (ArgSpec)
    build(source, ...) -> Kernel           the whole compile (compiler.driver.compile's miss)

xDSL, the passes and LLVM load with this module. compiler/driver.py imports it at the
first compile that misses both caches (or at reference(), or for a source that is
already a module), so that a kernel served from a cache never loads them.
"""

from __future__ import annotations

import time
from io import StringIO

from xdsl.dialects import affine, func, llvm, memref, vector
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    TensorType,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.printer import Printer
from xdsl.traits import SymbolTable
from xdsl.utils.exceptions import VerifyException

from compiler import numpy_reference as ref
from compiler.jit.emit import to_llvm_ir
from compiler.jit.engine import Timings, compile_ir, timed
from compiler.jit.kernel import (
    MAX_THREADS,
    OBJECTS_SUFFIX,
    AllocationSite,
    ArgSpec,
    Kernel,
    ProfileSlot,
    array_data_offset,
    objects_wrapper,
)
from dialects.context import make_context
from dialects.dtypes import numpy_dtype
from dialects.layout import VIEW_OPS
from dialects.loom import (
    ELEMENT_TYPES,
    LoomComputeOp,
    PrefetchOp,
    argument_buffer_type,
    argument_layout,
    type_names,
)
from passes import pipelines
from passes.conversion.loom_profile import PROFILE_ATTR
from passes.conversion.to_llvm.abi import ALLOC_SITE, STATUS, memref_layout
from passes.pipelines import Callback
from passes.support.diagnostics import LoomError, op_location
from passes.support.parser import parse_module
from passes.support.remarks import collect
from passes.support.target import default_threads
from passes.support.verifier import verify

def print_module(op: Operation) -> str:
    """`op` as MLIR text."""
    out = StringIO()
    Printer(stream=out).print_op(op)
    return out.getvalue()


def load_module(source: str | ModuleOp, filename: str = "<source>") -> ModuleOp:
    """Parse MLIR text (or clone a module) and verify it; errors are LoomError."""
    if isinstance(source, ModuleOp):
        module = source.clone()
        verify(module)
        return module
    if not isinstance(source, str):
        raise TypeError(f"source must be MLIR text or a ModuleOp, got {type(source).__name__}")
    return parse_module(make_context(), source, filename)


def find_entry(module: ModuleOp, entry: str | None, *, option: str = "entry=") -> func.FuncOp:
    """The function to run: the one named `entry`, else the only function with a body.
    `option` is how the caller names the choice in the error (`--entry` for loom-run)."""
    funcs = [op for op in module.ops if isinstance(op, func.FuncOp) and op.body.blocks]
    names = ", ".join("@" + f.sym_name.data for f in funcs) or "none"
    where = funcs[0] if funcs else next(iter(module.ops), None)  # the error's location
    if entry is not None:
        for f in funcs:
            if f.sym_name.data == entry:
                return f
        raise LoomError(f"no function @{entry} in the module (functions: {names})", where)
    if len(funcs) != 1:
        raise LoomError(f"the module has {len(funcs)} functions ({names}): name one with {option}", where)
    return funcs[0]


#: ops that only read the memref operand they are given (a view's results are followed)
_READS = (memref.LoadOp, memref.DimOp, affine.LoadOp, vector.LoadOp, vector.MaskedLoadOp, PrefetchOp)


def _may_write(value: SSAValue) -> bool:
    """Whether anything may write through `value` (a memref) or a view of it: a loom op's
    `outs`, a store, a copy's target, a call, any op not known to only read it."""
    for use in value.uses:
        op = use.operation
        if isinstance(op, LoomComputeOp):
            if use.index >= len(op.ins):
                return True
        elif isinstance(op, memref.CopyOp):
            if use.index == 1:
                return True
        elif isinstance(op, VIEW_OPS):
            if any(_may_write(r) for r in op.results):
                return True
        elif not isinstance(op, _READS):
            return True
    return False


def written_arguments(fn: func.FuncOp) -> set[int]:
    """The memref arguments `fn` may write into (conservatively: through any view, and
    any argument passed to a call). Tensor arguments are values: never written."""
    return {i for i, a in enumerate(fn.body.block.args) if isinstance(a.type, MemRefType) and _may_write(a)}


def _passed_type(fn: func.FuncOp, index: int):
    """The type argument `index` is passed as: a tensor with `loom.buffer_layout` as the
    strided memref loom-bufferize makes of it (the array's strides), any other as it is."""
    if argument_layout(fn, index) is None:
        return fn.body.block.args[index].type
    try:
        return argument_buffer_type(fn, index)
    except VerifyException as e:
        raise LoomError(str(e), fn) from None


def signature(fn: func.FuncOp) -> tuple[list[ArgSpec], list[ArgSpec]]:
    """The kernel's arrays: the arguments (with the layouts of memref ones, and whether
    the function writes them), then the tensor results. Errors are located at `fn`."""
    args = fn.body.block.args
    written = written_arguments(fn)
    inputs = [
        arg_spec(f"%{a.name_hint or i}", _passed_type(fn, i), is_output=False, writes=i in written, op=fn)
        for i, a in enumerate(args)
    ]
    outputs = [
        arg_spec(f"result #{i}", t, is_output=True, op=fn) for i, t in enumerate(fn.function_type.outputs)
    ]
    return inputs, outputs


def _memref_layout(name: str, t: MemRefType, op: Operation | None) -> tuple[tuple[int, ...], int]:
    """The element strides and offset of a memref argument, or a LoomError saying why a
    kernel cannot take it (dynamic sizes or layout, a memory space, a non-strided map)."""
    if any(n < 0 for n in t.get_shape()):
        raise LoomError(f"argument {name} has a dynamic shape ({t}): kernels take static shapes only", op)
    try:
        layout = memref_layout(t)
    except LoomError as e:
        raise LoomError(f"argument {name}: {e.message.removeprefix('loom-convert-to-llvm: ')}", op) from None
    return layout.strides, layout.offset


def arg_spec(name: str, t: Attribute, *, is_output: bool, writes: bool = False,
             op: Operation | None = None) -> ArgSpec:
    """The spec of argument (or result) `name` of type `t`; errors are located at `op`
    (the function)."""
    if is_output and not isinstance(t, TensorType):
        raise LoomError(f"{name} is {t}: a kernel's results must be tensors (a function on memrefs "
                        "writes its results into arguments)", op)
    if not isinstance(t, TensorType | MemRefType):
        raise LoomError(f"kernel arguments must be tensors or memrefs, got {t} for {name}", op)
    dtype = numpy_dtype(t.get_element_type())
    if dtype is None:
        raise LoomError(f"unsupported element type {t.get_element_type()} for {name} ({type_names(ELEMENT_TYPES)} "
                        "are)", op)
    shape = tuple(t.get_shape())
    if isinstance(t, TensorType):
        if any(n < 0 for n in shape):
            raise LoomError(f"{name} has a dynamic shape ({t}): kernels take static shapes only", op)
        return ArgSpec(name, shape, dtype, is_output, type=str(t))
    strides, offset = _memref_layout(name, t, op)
    byte_strides = tuple(s * dtype.itemsize for s in strides)
    return ArgSpec(name, shape, dtype, is_output, writes, byte_strides, offset, str(t))


def _failure_table(module: ModuleOp, entry: str) -> tuple[bool, dict[int, AllocationSite]]:
    """Whether the lowered entry function returns a status, and what each status means:
    the allocation sites loom-convert-to-llvm tagged (`ALLOC_SITE`)."""
    fn = next((op for op in module.ops if isinstance(op, llvm.FuncOp) and op.sym_name.data == entry), None)
    if fn is None:
        raise LoomError(f"the pipeline left no function @{entry} in the llvm dialect")
    sites: dict[int, AllocationSite] = {}
    for f in module.ops:
        if not isinstance(f, llvm.FuncOp):
            continue
        for call in f.walk():
            info = call.attributes.get(ALLOC_SITE)
            if not isinstance(call, llvm.CallOp) or not isinstance(info, DictionaryAttr):
                continue
            name = info.data["name"].data
            sites[info.data["site"].value.data] = AllocationSite(
                f.sym_name.data, f"%{name}" if name else "", str(info.data["type"]), info.data["bytes"].value.data,
                op_location(call))
    return fn.function_type.output == STATUS, sites


def _check_threads(module: ModuleOp) -> None:
    """Each parallel loop of the lowered module runs on at most `MAX_THREADS` threads:
    the count its `GOMP_parallel` call passes (0: libgomp's default, `OMP_NUM_THREADS`
    or the cores), whichever option or environment variable set it. More is a LoomError
    at the loop (see compiler/jit/kernel.py: libgomp would crash or end the process)."""
    for call in module.walk():
        if not (isinstance(call, llvm.CallOp) and call.callee is not None
                and call.callee.string_value() == "GOMP_parallel"):
            continue
        count = call.args[2].owner
        if not (isinstance(count, llvm.ConstantOp) and isinstance(count.value, IntegerAttr)):
            continue
        threads = count.value.value.data
        if (threads or default_threads()) > MAX_THREADS:
            what = f"{threads} threads" if threads else f"libgomp's default of {default_threads()} threads"
            body = call.args[0].owner  # the loop's thread function: where the loop was
            where = SymbolTable.lookup_symbol(module, body.global_name) if isinstance(body, llvm.AddressOfOp) else None
            raise LoomError(f"a parallel loop would run on {what}, more than the {MAX_THREADS} Loom runs a loop on "
                            "(libgomp keeps a record per thread on the caller's stack, and ends the process when "
                            "it cannot start a thread): ask for fewer (compile(num_threads=...), loom-run --threads, "
                            "OMP_NUM_THREADS or the pass's num-threads)", where or call)


def build(source: str | ModuleOp, *, entry: str | None, pipeline: str, num_threads: int | None, remarks: bool,
          stages: bool, filename: str, timings: Timings | None, profile: bool = False,
          algorithms: str = "exact") -> Kernel:
    """The kernel compile() makes of `source` (see compiler.driver.compile: the arguments
    are its own, checked there)."""
    with timed(timings, "parse+verify"):
        module = load_module(source, filename)
    with timed(timings, "set-up"):
        fn = find_entry(module, entry)
        name = fn.sym_name.data
        inputs, outputs = signature(fn)
        flops = ref.flops(fn)
        kept: dict[str, str] = {"input": print_module(module)} if stages else {}

        def record(prev, mod, _next):
            verify(mod)
            if prev is not None:
                kept[prev.name if prev.name not in kept else f"{prev.name}#{len(kept)}"] = print_module(mod)

        passes = pipelines.build(pipelines.with_algorithms(pipeline, algorithms),
                                 _pass_clock(timings, record if stages else None), literal=False,
                                 num_threads=num_threads, profile=profile)
    with collect() as collected:
        passes.apply(make_context(), module)
    _check_threads(module)
    if not stages:
        with timed(timings, "verify"):
            verify(module)
    with timed(timings, "LLVM emission"):
        llvm_ir = to_llvm_ir(module)
        returns_status, sites = _failure_table(module, name)
    slots = _profile_slots(module, name) if profile else None
    offset = array_data_offset()
    arity = len(inputs) + len(outputs) + (slots is not None)
    wrapper = objects_wrapper(name, arity, returns_status, offset) if offset is not None else ""
    jit_module = compile_ir(llvm_ir + wrapper, timings)
    return Kernel(
        entry=name,
        inputs=inputs,
        outputs=outputs,
        address=jit_module.function_address(name),
        objects_address=jit_module.function_address(name + OBJECTS_SUFFIX) if wrapper else 0,
        flops=flops,
        llvm_ir=llvm_ir,
        optimized_ir=jit_module.optimized_ir,
        stages=kept,
        pipeline=pipeline,
        num_threads=num_threads,
        remarks=[str(r) for r in collected] if remarks else [],
        remark_records=tuple(collected) if remarks else (),
        target=jit_module.cpu,
        returns_status=returns_status,
        allocation_sites=sites,
        profile_slots=slots,
        _module=jit_module,
    )


def _profile_slots(module: ModuleOp, entry: str) -> tuple[ProfileSlot, ...]:
    """What each of the entry's timers (loom-profile) times, or a LoomError where the
    pipeline did not let the pass see the function (lowered to LLVM in one pass)."""
    described = module.attributes.get(PROFILE_ATTR)
    slots = described.data.get(entry) if isinstance(described, DictionaryAttr) else None
    if not isinstance(slots, ArrayAttr):
        raise LoomError(f"profile=True: loom-profile did not see @{entry} on memrefs (the pipeline runs the pass "
                        "after the lowering to LLVM): leave it out, and compile() runs it after the schedule")
    return tuple(ProfileSlot(s.data["tag"].data, s.data["location"].data) for s in slots.data)


def _pass_clock(timings: Timings | None, then: Callback | None) -> Callback | None:
    """The pipeline's callback for `timings`: the CPU and wall seconds of each pass (a pass
    that comes twice is `name#2`), then `then` (timed as `verify`: what `stages` adds)."""
    if timings is None:
        return then
    clock = [0.0, 0.0]

    def between_passes(previous, module, following) -> None:
        cpu, wall = time.process_time(), time.perf_counter()
        if previous is not None:
            name, n = previous.name, 1
            while name in timings:
                n += 1
                name = f"{previous.name}#{n}"
            timings[name] = (cpu - clock[0], wall - clock[1])
        if then is not None:
            with timed(timings, "verify"):
                then(previous, module, following)
        clock[:] = [time.process_time(), time.perf_counter()]

    return between_passes

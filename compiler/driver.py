"""compile() and reference(): the Python face of Loom.

    source text or module --parse--> loom IR --pipeline--> llvm dialect
        --llvm_emit--> LLVM IR --jit (O3, host CPU)--> machine code --> Kernel
"""

from __future__ import annotations

import os
import threading

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.printer import Printer

from compiler import numpy_reference as ref
from compiler.context import make_context
from compiler.diagnostics import LoomError, parse_module, verify
from compiler.kernel import ArgSpec, Kernel
from compiler.pipelines import build
from compiler.remarks import collect

_cache: dict[tuple, Kernel] = {}
_cache_lock = threading.Lock()


def _print(op) -> str:
    from io import StringIO

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


def find_entry(module: ModuleOp, entry: str | None) -> func.FuncOp:
    """The function to run: the one named `entry`, else the only function with a body."""
    funcs = [op for op in module.ops if isinstance(op, func.FuncOp) and op.body.blocks]
    if entry is not None:
        for f in funcs:
            if f.sym_name.data == entry:
                return f
        names = ", ".join("@" + f.sym_name.data for f in funcs) or "none"
        raise LoomError(f"no function @{entry} in the module (functions: {names})")
    if len(funcs) != 1:
        names = ", ".join("@" + f.sym_name.data for f in funcs) or "none"
        raise LoomError(f"the module has {len(funcs)} functions ({names}): name one with entry=")
    return funcs[0]


def signature(fn: func.FuncOp) -> tuple[list[ArgSpec], list[ArgSpec]]:
    args = fn.body.block.args
    inputs = [
        ArgSpec.from_type(f"%{a.name_hint or i}", a.type, is_output=False) for i, a in enumerate(args)
    ]
    outputs = [
        ArgSpec.from_type(f"result #{i}", t, is_output=True) for i, t in enumerate(fn.function_type.outputs)
    ]
    return inputs, outputs


def compile(
    source: str | ModuleOp,
    *,
    entry: str | None = None,
    pipeline: str = "naive",
    num_threads: int | None = None,
    remarks: bool = False,
    stages: bool = False,
    filename: str = "<source>",
) -> Kernel:
    """Compile a loom function to machine code.

    `source` is MLIR text or a module; `entry` names the function (optional when there is
    one); `pipeline` is a named pipeline (`naive`) or a pass-list string, completed with
    the steps it leaves out (`compiler.pipelines.complete`). With
    `remarks=True` the kernel's `remarks` say what each schedule pass did. With
    `stages=True` every pass's output is verified and kept as text in `kernel.stages`
    (a debugging aid: it costs about a third of the compile time); by default the input
    and the final module are verified. The result is cached in memory per (source,
    entry, pipeline, num_threads, remarks, stages).
    """
    if num_threads is not None and (not isinstance(num_threads, int) or num_threads < 1):
        raise ValueError(f"num_threads must be a positive integer, got {num_threads!r}")
    if not isinstance(pipeline, str):
        raise TypeError(f"pipeline must be a string, got {type(pipeline).__name__}")
    if not isinstance(source, str | ModuleOp):
        raise TypeError(f"source must be MLIR text or a ModuleOp, got {type(source).__name__}")
    key = (source if isinstance(source, str) else _print(source), entry, pipeline, num_threads, remarks, stages,
           os.environ.get("LOOM_TARGET", ""))  # the default pipeline plans for the target
    with _cache_lock:
        if key in _cache:
            return _cache[key]

    module = load_module(source, filename)
    fn = find_entry(module, entry)
    name = fn.sym_name.data
    inputs, outputs = signature(fn)
    flops = ref.flops(fn)

    kept: dict[str, str] = {"input": _print(module)} if stages else {}

    def record(prev, mod, _next):
        verify(mod)
        if prev is not None:
            kept[prev.name if prev.name not in kept else f"{prev.name}#{len(kept)}"] = _print(mod)

    with collect() as collected:
        build(pipeline, record if stages else None, literal=False).apply(make_context(), module)
    if not stages:
        verify(module)

    from compiler.jit import compile_ir
    from compiler.llvm_emit import to_llvm_ir

    llvm_ir = to_llvm_ir(module)
    jit_module = compile_ir(llvm_ir)
    kernel = Kernel(
        entry=name,
        inputs=inputs,
        outputs=outputs,
        address=jit_module.function_address(name),
        flops=flops,
        llvm_ir=llvm_ir,
        optimized_ir=jit_module.optimized_ir,
        stages=kept,
        pipeline=pipeline,
        num_threads=num_threads,
        remarks=[str(r) for r in collected] if remarks else [],
        _module=jit_module,
    )
    with _cache_lock:
        _cache[key] = kernel
    return kernel


def reference(source: str | ModuleOp, *arrays: np.ndarray, entry: str | None = None):
    """The same function evaluated with numpy in float64: the result array (a tuple for
    several results)."""
    module = load_module(source)
    fn = find_entry(module, entry)
    inputs, _ = signature(fn)
    if len(arrays) != len(inputs):
        raise TypeError(f"@{fn.sym_name.data} takes {len(inputs)} arrays, got {len(arrays)}")
    for i, (spec, arr) in enumerate(zip(inputs, arrays)):
        if np.shape(arr) != spec.shape:
            raise ValueError(f"@{fn.sym_name.data} argument #{i} ({spec.name}) has shape "
                             f"{np.shape(arr)}, expected {spec.shape}")
    results = ref.evaluate(fn, list(arrays))
    if not results:
        return None
    return results[0] if len(results) == 1 else results

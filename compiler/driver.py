"""compile() and reference(): the Python face of Loom.

    source text or module --parse--> loom IR --pipeline--> llvm dialect
        --llvm_emit--> LLVM IR --jit (O3, host CPU)--> machine code --> Kernel
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects import affine, func, memref, vector
from xdsl.dialects.builtin import DictionaryAttr, MemRefType, ModuleOp
from xdsl.ir import SSAValue
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from compiler import numpy_reference as ref
from dialects.context import make_context
from passes.support.diagnostics import LoomError, op_location
from passes.support.parser import parse_module
from passes.support.verifier import verify
from compiler.jit import pool
from compiler.jit.kernel import OBJECTS_SUFFIX, AllocationSite, ArgSpec, Kernel, array_data_offset, objects_wrapper
from passes.pipelines import Callback, build
from passes.support.remarks import collect
from dialects.layout import VIEW_OPS
from dialects.loom import LoomComputeOp, PrefetchOp, argument_buffer_type, argument_layout

if TYPE_CHECKING:  # compiler.jit.engine imports LLVM: not at `import compiler`
    from compiler.jit.engine import Timings

pool.install()  # the kernels' calls to the buffer pool resolve to its one copy


class KernelCache:
    """compile()'s in-memory cache: the `size` kernels used last (least recently used
    out first). A kernel dropped from it is freed, its machine code included, once
    nothing else holds it (compiler/jit/engine.py); one a caller still holds keeps working.
    `size` is `LOOM_CACHE_SIZE` (default 64, read at the first compile);
    `compiler.set_cache_size(n)` changes it, 0 turns caching off."""

    def __init__(self) -> None:
        self._entries: OrderedDict[tuple, Kernel] = OrderedDict()
        self._lock = threading.Lock()
        self._size: int | None = None

    @property
    def size(self) -> int:
        if self._size is None:
            text = os.environ.get("LOOM_CACHE_SIZE", "64")
            try:
                size = int(text)  # not str.isdigit(), which takes "²" and then int() fails
            except ValueError:
                size = -1
            if size < 0:
                raise LoomError(f"LOOM_CACHE_SIZE must be a non-negative integer, got {text.strip()!r}")
            self._size = size
        return self._size

    def get(self, key: tuple) -> Kernel | None:
        if self.size == 0:  # (a bad LOOM_CACHE_SIZE is an error here, before the compile)
            return None
        with self._lock:
            kernel = self._entries.get(key)
            if kernel is not None:
                self._entries.move_to_end(key)
            return kernel

    def put(self, key: tuple, kernel: Kernel) -> None:
        with self._lock:
            if self.size > 0:
                self._entries[key] = kernel
                self._entries.move_to_end(key)
            self._trim()

    def resize(self, size: int) -> None:
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ValueError(f"the kernel cache size must be a non-negative integer, got {size!r}")
        with self._lock:
            self._size = size
            self._trim()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def _trim(self) -> None:
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)


kernel_cache = KernelCache()


def set_cache_size(size: int) -> None:
    """Keep at most `size` compiled kernels in compile()'s cache (0: none)."""
    kernel_cache.resize(size)



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
        ArgSpec.from_type(f"%{a.name_hint or i}", _passed_type(fn, i), is_output=False, writes=i in written, op=fn)
        for i, a in enumerate(args)
    ]
    outputs = [
        ArgSpec.from_type(f"result #{i}", t, is_output=True, op=fn) for i, t in enumerate(fn.function_type.outputs)
    ]
    return inputs, outputs


def _failure_table(module: ModuleOp, entry: str) -> tuple[bool, dict[int, AllocationSite]]:
    """Whether the lowered entry function returns a status, and what each status means:
    the allocation sites loom-convert-to-llvm tagged (`ALLOC_SITE`)."""
    from xdsl.dialects import llvm

    from passes.conversion.to_llvm.abi import ALLOC_SITE, STATUS

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


def compile(
    source: str | ModuleOp,
    *,
    entry: str | None = None,
    pipeline: str = "default",
    num_threads: int | None = None,
    remarks: bool = False,
    stages: bool = False,
    filename: str = "<source>",
    timings: Timings | None = None,
    cache: bool = True,
) -> Kernel:
    """Compile a loom function to machine code.

    `source` is MLIR text or a module; `entry` names the function (optional when there is
    one); `pipeline` is a named pipeline (`default`, the schedule the cost model picks for
    the host; `naive`, the textbook loops) or a pass-list string, completed with
    the steps it leaves out (`passes.pipelines.complete`); `num_threads` is how many
    threads the parallel loops of `loom-default` and `loom-parallelize` run on (default:
    `OMP_NUM_THREADS`, else the cores this process may run on; 1 makes serial code);
    `filename` is what error locations and allocation failures name. With
    `remarks=True` the kernel's `remarks` say what each schedule pass did. With
    `stages=True` every pass's output is verified and kept as text in `kernel.stages`
    (a debugging aid: it costs about a third of the compile time); by default the input
    and the final module are verified. The result is cached in memory per (source,
    filename, entry, pipeline, num_threads, remarks, stages, `LOOM_TARGET`): the last 64
    kernels used (`LOOM_CACHE_SIZE`, `compiler.set_cache_size`; see `KernelCache`); and
    on disk for later processes, keyed by that, Loom's version and sources and the CPU
    (`LOOM_CACHE_DIR`, `LOOM_CACHE_MAX_BYTES`; see compiler/jit/disk_cache.py). A kernel found on
    disk is loaded in a few milliseconds, before anything is parsed. `cache=False`
    neither uses nor fills either cache.

    `timings`, a dict, receives the CPU and wall seconds of each stage, in order:
    `parse+verify`; `set-up` (the entry, its signature, the pass pipeline); each pass (a
    pass that comes twice is `name#2`); `verify` (the final module, or with `stages` each
    pass's output); `LLVM emission`; then the JIT's `LLVM parse`, `LLVM O3` and `machine
    code` (`compiler.jit.engine.compile_ir`). A timed compile neither uses nor fills the caches:
    it is a real compile (what `loom-bench --compile` measures).
    """
    if num_threads is not None and (not isinstance(num_threads, int) or num_threads < 1):
        raise ValueError(f"num_threads must be a positive integer, got {num_threads!r}")
    if not isinstance(pipeline, str):
        raise TypeError(f"pipeline must be a string, got {type(pipeline).__name__}")
    if not isinstance(source, str | ModuleOp):
        raise TypeError(f"source must be MLIR text or a ModuleOp, got {type(source).__name__}")
    if not isinstance(cache, bool):
        raise TypeError(f"cache must be True or False, got {cache!r}")
    key = _cache_key(source, entry=entry, pipeline=pipeline, num_threads=num_threads, remarks=remarks, stages=stages,
                     filename=filename)
    cached, disk_key = _cached(key) if cache and timings is None else (None, None)
    if cached is not None:
        return cached
    from compiler.jit.emit import to_llvm_ir
    from compiler.jit.engine import compile_ir, timed

    with timed(timings, "parse+verify"):
        module = load_module(source, filename)
    with timed(timings, "set-up"):
        fn = find_entry(module, entry)
        name = fn.sym_name.data
        inputs, outputs = signature(fn)
        flops = ref.flops(fn)
        kept: dict[str, str] = {"input": _print(module)} if stages else {}

        def record(prev, mod, _next):
            verify(mod)
            if prev is not None:
                kept[prev.name if prev.name not in kept else f"{prev.name}#{len(kept)}"] = _print(mod)

        passes = build(pipeline, _pass_clock(timings, record if stages else None), literal=False,
                       num_threads=num_threads)
    with collect() as collected:
        passes.apply(make_context(), module)
    if not stages:
        with timed(timings, "verify"):
            verify(module)
    with timed(timings, "LLVM emission"):
        llvm_ir = to_llvm_ir(module)
        returns_status, sites = _failure_table(module, name)
    offset = array_data_offset()
    arity = len(inputs) + len(outputs)
    wrapper = objects_wrapper(name, arity, returns_status, offset) if offset is not None else ""
    jit_module = compile_ir(llvm_ir + wrapper, timings)
    kernel = Kernel(
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
        target=jit_module.cpu,
        returns_status=returns_status,
        allocation_sites=sites,
        _module=jit_module,
    )
    if cache and timings is None:
        kernel_cache.put(key, kernel)
        if disk_key is not None:
            from compiler.jit.disk_cache import disk_cache

            disk_cache.store(disk_key, kernel)
    return kernel


def _cache_key(source: str | ModuleOp, *, entry: str | None = None, pipeline: str = "default",
               num_threads: int | None = None, remarks: bool = False, stages: bool = False,
               filename: str = "<source>", cache: bool = True) -> tuple:
    """compile()'s cache key for its arguments (the same defaults; `cache` is not part of it)."""
    return (source if isinstance(source, str) else _print(source), filename, entry, pipeline, num_threads, remarks,
            stages, os.environ.get("LOOM_TARGET", ""))  # the default pipeline plans for the target


#: a compile_in_parallel worker: compile() each job read from stdin (JSON), errors left
#: to the parent (its own compile() says them)
_WORKER = """
import json, sys
from compiler.driver import compile
for job in json.load(sys.stdin):
    try:
        compile(**job)
    except Exception:
        pass
"""


def compile_in_parallel(jobs: Sequence[dict], processes: int | None = None) -> int:
    """Fill the disk cache with the kernels `compile(**job)` builds for each job (keywords
    of compile(): `JitFunction.compile_request`), in up to `processes` worker processes
    (default: the cores), so that the compile() calls that follow load them. A job already
    cached (it is then kept in memory), with the caches off, or alone, is left to the
    caller. Returns the number of jobs given to the workers."""
    import json
    import subprocess
    import sys

    from passes.support.target import default_threads

    todo = []
    for job in jobs:
        if not job.get("cache", True):
            continue
        kernel, disk_key = _cached(_cache_key(**job))
        if kernel is None and disk_key is not None:
            todo.append(job)
    processes = min(len(todo), processes or default_threads())
    if processes < 2:
        return 0
    shares: list[list[dict]] = [[] for _ in range(processes)]
    loads = [0] * processes
    for job in sorted(todo, key=lambda j: -len(j["source"])):  # the longest first, to the least loaded
        i = loads.index(min(loads))
        shares[i].append(job)
        loads[i] += len(job["source"])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    workers = []
    try:
        for share in shares:
            worker = subprocess.Popen([sys.executable, "-c", _WORKER], stdin=subprocess.PIPE,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment, text=True)
            workers.append(worker)
            worker.stdin.write(json.dumps(share))
            worker.stdin.close()
    except OSError:  # no worker could start, or one died at once: what is not on disk, the caller compiles
        pass
    for worker in workers:
        worker.wait()
    return len(todo)


def _cached(key: tuple) -> tuple[Kernel | None, str | None]:
    """compile()'s kernel for `key` from memory, else from the disk (then kept in
    memory too); and the disk cache's key for it (None when the disk cache is off)."""
    from compiler.jit.disk_cache import disk_cache  # not at `import compiler`: what it costs counts in a hit

    kernel = kernel_cache.get(key)
    if kernel is not None or disk_cache.folder() is None:
        return kernel, None
    disk_key = disk_cache.kernel_key(*key)
    kernel = disk_cache.load(disk_key)
    if kernel is not None:
        kernel_cache.put(key, kernel)
    return kernel, disk_key


def _pass_clock(timings: Timings | None, then: Callback | None) -> Callback | None:
    """The pipeline's callback for `timings`: the CPU and wall seconds of each pass (a pass
    that comes twice is `name#2`), then `then` (timed as `verify`: what `stages` adds)."""
    if timings is None:
        return then
    from compiler.jit.engine import timed

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

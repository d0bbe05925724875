"""compile() and reference(): the Python face of Loom.

compile() looks for the kernel in two caches first, in memory (`kernel_cache`) and on
disk (compiler/jit/disk_cache.py), keyed by the source text and the options, before
anything is parsed; only a kernel in neither is compiled (compiler/build.py: parse, the
pass pipeline, LLVM IR, the JIT). This module imports neither xDSL nor LLVM: they load
with compiler/build.py at the first compile that misses both caches, so that a kernel
served from a cache in a fresh process costs numpy, cffi and reading one file.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from compiler.jit import pool
from compiler.jit.disk_cache import disk_cache
from compiler.jit.kernel import MAX_THREADS, Kernel
from passes.support.algorithms import check_algorithms
from passes.support.diagnostics import LoomError
from passes.support.target import default_threads

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from compiler.jit.engine import Timings

pool.install()  # the kernels' calls to the buffer pool resolve to its one copy


class KernelCache:
    """The process's budget of compiled kernels in memory: compile()'s kernels, by their
    source and options, and the specializations of `@loom.jit` functions, by function and
    signature (each holds its kernel: `put(key, kernel, value)`). At most `size` distinct
    kernels are held, the least recently used out first (a specialization and compile()'s
    entry of its kernel count once). A kernel dropped from it is freed, its machine code
    included, once nothing else holds it (compiler/jit/engine.py); one a caller still
    holds keeps working. `size` is `LOOM_CACHE_SIZE` (default 64, read at the first
    compile); `compiler.set_cache_size(n)` changes it, 0 turns caching off."""

    def __init__(self) -> None:
        self._entries: OrderedDict[tuple, tuple[Kernel, object]] = OrderedDict()  # key -> (kernel, value)
        self._holders: dict[int, int] = {}  # id(kernel) -> how many entries hold it
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

    def get(self, key: tuple):
        """The value kept under `key` (now the most recently used), or None."""
        if self.size == 0:  # (a bad LOOM_CACHE_SIZE is an error here, before the compile)
            return None
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: tuple, kernel: Kernel, value: object = None) -> None:
        """Keep `value` (the kernel itself by default), which holds `kernel`, under `key`."""
        with self._lock:
            if self.size > 0:
                self._drop(key)
                self._entries[key] = (kernel, kernel if value is None else value)
                self._holders[id(kernel)] = self._holders.get(id(kernel), 0) + 1
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
            self._holders.clear()

    def __len__(self) -> int:
        """How many distinct kernels it holds."""
        return len(self._holders)

    def _drop(self, key: tuple) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            held = self._holders.pop(id(entry[0])) - 1
            if held:
                self._holders[id(entry[0])] = held

    def _trim(self) -> None:
        while len(self._holders) > self.size:
            self._drop(next(iter(self._entries)))


kernel_cache = KernelCache()


def set_cache_size(size: int) -> None:
    """Keep at most `size` compiled kernels in compile()'s cache (0: none)."""
    kernel_cache.resize(size)


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
    profile: bool = False,
    algorithms: str = "exact",
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
    disk is loaded in a few milliseconds, before anything is parsed: xDSL, the passes and
    LLVM load at the first compile that misses both caches (compiler/build.py).
    `cache=False` neither uses nor fills either cache.

    `profile=True` times each loop nest of the kernel as it runs (loom-profile, after the
    schedule): `kernel.profile()` then says where its calls spent their time, nest by
    nest. A profiled kernel is kept in the memory cache only, never on disk.

    `algorithms="fast"` lets the pipeline use algorithms that round differently from the
    ops' sums (each with a stated bound): Winograd's convolution for 3x3 stride-1 NHWC
    conv2d, where the cost model estimates it faster (loom-winograd; the bound in
    docs/guide/winograd.md). The default, "exact", changes results by reassociation only.

    `timings`, a dict, receives the CPU and wall seconds of each stage, in order:
    `parse+verify`; `set-up` (the entry, its signature, the pass pipeline); each pass (a
    pass that comes twice is `name#2`); `verify` (the final module, or with `stages` each
    pass's output); `LLVM emission`; then the JIT's `LLVM parse`, `LLVM O3` and `machine
    code` (`compiler.jit.engine.compile_ir`). A timed compile neither uses nor fills the caches:
    it is a real compile (what `loom-bench --compile` measures).
    """
    if num_threads is not None and (not isinstance(num_threads, int) or isinstance(num_threads, bool)
                                    or not 1 <= num_threads <= MAX_THREADS):
        raise ValueError(f"num_threads must be a positive integer of at most {MAX_THREADS} (the most threads Loom runs "
                         f"a loop on: compiler/jit/kernel.py), got {num_threads!r}")
    if not isinstance(pipeline, str):
        raise TypeError(f"pipeline must be a string, got {type(pipeline).__name__}")
    text = _source_text(source)
    if not isinstance(cache, bool):
        raise TypeError(f"cache must be True or False, got {cache!r}")
    if not isinstance(profile, bool):
        raise TypeError(f"profile must be True or False, got {profile!r}")
    check_algorithms(algorithms)
    key = _cache_key(text, entry=entry, pipeline=pipeline, num_threads=num_threads, remarks=remarks, stages=stages,
                     filename=filename, profile=profile, algorithms=algorithms)
    if profile:  # in memory only
        cached, disk_key = (kernel_cache.get(key) if cache and timings is None else None), None
    else:
        cached, disk_key = _cached(key) if cache and timings is None else (None, None)
    if cached is not None:
        return cached
    from compiler import build  # xDSL, the passes and LLVM: only now (see the module's docstring)

    kernel = build.build(source, entry=entry, pipeline=pipeline, num_threads=num_threads, remarks=remarks,
                         stages=stages, filename=filename, timings=timings, profile=profile, algorithms=algorithms)
    if cache and timings is None:
        kernel_cache.put(key, kernel)
        if disk_key is not None:
            disk_cache.store(disk_key, kernel)
    return kernel


def _source_text(source: str | ModuleOp) -> str:
    """What the caches know `source` by: its text, or a module's as printed (a TypeError
    for anything else)."""
    if isinstance(source, str):
        return source
    from xdsl.dialects.builtin import ModuleOp  # (a module is xDSL's: loaded already)

    from compiler.build import print_module

    if not isinstance(source, ModuleOp):
        raise TypeError(f"source must be MLIR text or a ModuleOp, got {type(source).__name__}")
    return print_module(source)


def _cache_key(source: str | ModuleOp, *, entry: str | None = None, pipeline: str = "default",
               num_threads: int | None = None, remarks: bool = False, stages: bool = False,
               filename: str = "<source>", cache: bool = True, profile: bool = False,
               algorithms: str = "exact") -> tuple:
    """compile()'s cache key for its arguments (the same defaults; `cache` is not part of it;
    a profiled kernel is another kernel: it takes its counters)."""
    if algorithms != "exact":  # another pipeline (an exact one's key stays as it was)
        pipeline = f"{pipeline} | algorithms={algorithms}"
    key = (_source_text(source), filename, entry, pipeline, num_threads, remarks, stages,
           os.environ.get("LOOM_TARGET", ""))  # the default pipeline plans for the target
    return (*key, "profile") if profile else key


def compile_in_parallel(jobs: Sequence[dict], processes: int | None = None) -> int:
    """Fill the disk cache with the kernels `compile(**job)` builds for each job (keywords
    of compile(): `JitFunction.compile_request`), in up to `processes` worker processes
    (default: the cores), so that the compile() calls that follow load them. A job already
    cached (it is then kept in memory), with the caches off, or alone, is left to the
    caller. Returns the number of jobs given to the workers."""
    import json
    import subprocess
    import sys

    todo = []
    for job in jobs:
        if not job.get("cache", True) or job.get("profile"):  # (a profiled kernel is never on disk)
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
    workers = []
    try:
        for share in shares:
            worker = subprocess.Popen([sys.executable, "-m", "compiler.worker"], stdin=subprocess.PIPE,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
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
    kernel = kernel_cache.get(key)
    if kernel is not None or disk_cache.folder() is None:
        return kernel, None
    disk_key = disk_cache.kernel_key(*key)
    kernel = disk_cache.load(disk_key)
    if kernel is not None:
        kernel_cache.put(key, kernel)
    return kernel, disk_key


def reference(source: str | ModuleOp, *arrays: np.ndarray, entry: str | None = None):
    """The same function evaluated with numpy in float64: the result array (a tuple for
    several results)."""
    from compiler import build, numpy_reference as ref  # xDSL: see compiler/build.py

    module = build.load_module(source)
    fn = build.find_entry(module, entry)
    inputs, _ = build.signature(fn)
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

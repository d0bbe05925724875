"""The JIT: LLVM IR text → O3 for the host CPU → machine code, one MCJIT engine per module.

Each module is parsed, given the host's triple and data layout, optimized with LLVM's
new pass manager at O3 for the host CPU (its name and features; loop and SLP
vectorization on), then compiled by an MCJIT engine of its own.

    optimize(ir_text) -> str          the optimized IR, for tests and --remarks
    assembly(ir_text) -> str          the host's assembly of the optimized IR (loom-opt -t asm)
    compile_ir(ir_text) -> JITModule  .function_address(name), .optimized_ir, .asm(), .cpu

A module's machine code lives as long as its `JITModule` (a `Kernel` holds one): when the
JITModule is garbage, its engine, and with it the code and LLVM's copy of the module, is
freed (at the next compile, or at `release()`, under the lock below: never from inside a
garbage collection). A process that compiles thousands of kernels and drops them keeps
its memory bounded; an address taken from a JITModule is valid only while that
JITModule is alive.

Every module's exported functions are renamed to a unique symbol, so two modules may
both define `@kernel`; `JITModule.function_address("kernel")` finds its own. External
symbols are resolved through the loader's table (`compiler.jit.loader.symbol_address`:
the runtime's own functions, which the buffer pool registers there, then the running
process, libgomp and libgcc_s): those the IR declares (aligned_alloc, free, erff,
loom_take) before code generation, and those code generation introduces (memset,
sincosf, __powisf2) from the object file's undefined symbols, before MCJIT links it. A
symbol found nowhere is a LoomError, never a call through a null pointer.

LLVM's global context is not thread-safe: all work on LLVM objects holds one lock
(`compiler.jit.loader.LOCK`, which the buffer pool's creation holds too).
"""

from __future__ import annotations

import functools
import gc
import itertools
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import llvmlite.binding as llvm
from llvmlite.binding.newpassmanagers import NewPassManager

from compiler.jit.loader import LOCK, is_registered, symbol_address
from passes.conversion.to_llvm.x86vector import missing_features
from passes.support.diagnostics import LoomError
from passes.support.target import machine

_lock = LOCK
_host: _Host | None = None
_module_ids = itertools.count()
_resolved: set[str] = set()  # external symbols made visible to the JIT's linker (process-wide)
_retired: list[llvm.ExecutionEngine] = []  # engines of dropped JITModules, freed under _lock


@dataclass(frozen=True)
class _Host:
    """What every module is compiled for: the host CPU (`passes.support.target.machine()`'s,
    the one name Loom gives it), its features, and a target machine for the O3 pipeline
    and for assembly listings."""

    target: llvm.Target
    cpu: str
    features: str
    target_machine: llvm.TargetMachine

    @functools.cached_property
    def feature_map(self) -> dict[str, bool]:
        """`features` as LLVM's names: `{"avx2": True, "avx512f": False, ...}` (read once)."""
        return {f[1:]: f[0] == "+" for f in self.features.split(",") if f}

    def new_target_machine(self) -> llvm.TargetMachine:
        """A target machine of the engine's own (an engine owns and frees its own)."""
        return self.target.create_target_machine(cpu=self.cpu, features=self.features, opt=3, jit=True)


def _get_host() -> _Host:
    """The host description (made on first use). Call with _lock held."""
    global _host
    if _host is None:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        llvm.initialize_native_asmparser()
        target = llvm.Target.from_default_triple()
        cpu, features = machine().cpu, llvm.get_host_cpu_features().flatten()
        _host = _Host(target, cpu, features,
                      target.create_target_machine(cpu=cpu, features=features, opt=3, jit=True))
    return _host


def _free_retired() -> None:
    """Free the engines of the JITModules that were dropped. Call with _lock held."""
    while _retired:
        _retired.pop().close()


def release() -> None:
    """Free now the machine code of every JITModule that is no longer referenced (the
    next compile would). The buffers parked in the pool are `compiler.jit.pool.clear()`'s."""
    gc.collect()  # JITModules in reference cycles
    with _lock:
        _free_retired()


def _resolve_symbols(names: list[str]) -> None:
    """Make the named symbols visible to the JIT's linker, where they can be found: the
    runtime's own (the buffer pool's, registered with the loader's table) always from
    the table, any other where LLVM does not find it in the process itself."""
    for name in names:
        if name in _resolved:
            continue
        if is_registered(name) or llvm.address_of_symbol(name) is None:
            address = symbol_address(name)
            if address is None:
                continue  # reported by the caller
            llvm.add_symbol(name, address)
        _resolved.add(name)


def undefined_symbols(obj: bytes) -> list[str]:
    """The symbols an ELF64 object file needs from elsewhere ([] for other formats)."""
    if obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:  # 64-bit little-endian ELF only
        return []
    (shoff,) = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize) for i in range(shnum)]
    names: list[str] = []
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind != 2 or not entsize:  # SHT_SYMTAB
            continue
        strtab_offset = sections[link][4]
        for pos in range(offset + entsize, offset + size, entsize):  # entry 0 is null
            st_name, _info_b, _other, shndx = struct.unpack_from("<IBBH", obj, pos)
            if shndx == 0 and st_name:  # SHN_UNDEF
                end = obj.index(b"\0", strtab_offset + st_name)
                name = obj[strtab_offset + st_name : end].decode()
                if not name.startswith("_GLOBAL_OFFSET_TABLE_"):
                    names.append(name)
    return names


def _parse(llvm_ir: str, host: _Host) -> llvm.ModuleRef:
    try:
        mod = llvm.parse_assembly(llvm_ir)
        mod.verify()
    except RuntimeError as e:
        raise LoomError(f"invalid LLVM IR: {str(e).strip()}") from None
    features = host.feature_map
    for fn in mod.functions:  # (LLVM would abort the process on an instruction the CPU lacks)
        lacks = missing_features(fn.name, features) if fn.is_declaration else None
        if lacks is not None:
            raise LoomError(f"the kernel calls {fn.name}, which needs {lacks}; this CPU ({host.cpu}) has "
                            "none of that (LOOM_TARGET names a dot-product instruction the host lacks?)")
    mod.triple = host.target_machine.triple
    mod.data_layout = str(host.target_machine.target_data)
    return mod


def _run_o3(mod: llvm.ModuleRef, host: _Host) -> None:
    """LLVM's O3 pipeline for `host.target_machine`'s CPU (anything with a
    `target_machine`: tests run it for other CPUs)."""
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pto.loop_interleaving = True
    pb = llvm.create_pass_builder(host.target_machine, pto)
    mpm = pb.getModulePassManager()
    try:
        mpm.run(mod, pb)
    finally:
        # llvmlite 0.50 never frees a ModulePassManager (ObjectRef's no-op _dispose comes
        # first in its MRO): ~86 KB per compile. Free it here, then forget the pointer.
        NewPassManager._dispose(mpm)
        mpm.detach()


def optimize(llvm_ir: str) -> str:
    """`llvm_ir` optimized at O3 for the host CPU, as text."""
    with _lock:
        _free_retired()
        host = _get_host()
        mod = _parse(llvm_ir, host)
        _run_o3(mod, host)
        return str(mod)


def _emit_assembly(optimized_ir: str, host: _Host) -> str:
    """The host's assembly of optimized IR text (code generation mutates its module: a
    fresh one). Call with _lock held."""
    mod = llvm.parse_assembly(optimized_ir)
    mod.triple = host.target_machine.triple
    return host.target_machine.emit_assembly(mod)


def optimized_assembly(optimized_ir: str) -> str:
    """The host's assembly of IR already optimized (a kernel read from the disk cache)."""
    with _lock:
        return _emit_assembly(optimized_ir, _get_host())


def assembly(llvm_ir: str) -> str:
    """The host's assembly of `llvm_ir` optimized at O3: the code `compile_ir` would
    generate, without an engine. Nothing is linked, so a call to an external symbol the
    process lacks is a `call` in the listing, not an error."""
    optimized = optimize(llvm_ir)
    with _lock:
        return _emit_assembly(optimized, _get_host())


class JITModule:
    """A module compiled by an engine of its own: its machine code lives as long as this
    object (see the module's docstring)."""

    def __init__(self, engine: llvm.ExecutionEngine, optimized_ir: str, symbols: dict[str, str], obj: bytes,
                 cpu: str):
        self._engine: llvm.ExecutionEngine | None = engine
        self._symbols = symbols
        self._asm: str | None = None
        self.optimized_ir = optimized_ir
        self.object_code = obj  # the relocatable object MCJIT linked (ELF on Linux)
        self.cpu = cpu  # the LLVM CPU the machine code was generated for

    @property
    def functions(self) -> list[str]:
        """Names of the functions this module defines and exports."""
        return sorted(self._symbols)

    @property
    def symbols(self) -> dict[str, str]:
        """Each exported function's name -> its symbol in the object code."""
        return dict(self._symbols)

    def function_address(self, name: str) -> int:
        """Address of the compiled function `name` (as written in the IR), valid while
        this JITModule is alive."""
        if name not in self._symbols:
            raise LoomError(f"no function '{name}' in this module (it has: {', '.join(self.functions) or 'none'})")
        with _lock:
            if self._engine is None:
                raise LoomError("this module's machine code was freed (JITModule.close())")
            address = self._engine.get_function_address(self._symbols[name])
        if not address:
            raise LoomError(f"function '{name}' did not link")
        return address

    def asm(self) -> str:
        """Assembly of the optimized module for the host CPU."""
        with _lock:
            if self._asm is None:
                self._asm = _emit_assembly(self.optimized_ir, _get_host())
            return self._asm

    def close(self) -> None:
        """Free the machine code now: no address of this module may be called after."""
        with _lock:
            if self._engine is not None:
                self._engine.close()
                self._engine = None

    def __del__(self) -> None:
        # Not freed here: a finalizer may run in any thread, in the middle of anything.
        engine, self._engine = getattr(self, "_engine", None), None
        if engine is not None and _retired is not None:  # None: the interpreter is exiting
            _retired.append(engine)


Timings = dict[str, tuple[float, float]]  # stage -> (CPU seconds, wall seconds)


@contextmanager
def timed(timings: Timings | None, stage: str) -> Iterator[None]:
    """Add the CPU and wall seconds the block takes to `timings[stage]` (when given)."""
    if timings is None:
        yield
        return
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        yield
    finally:
        before = timings.get(stage, (0.0, 0.0))
        timings[stage] = (before[0] + time.process_time() - cpu, before[1] + time.perf_counter() - wall)


def _export_names(mod: llvm.ModuleRef) -> dict[str, str]:
    """Rename the module's exported functions to symbols of their own: name -> symbol."""
    suffix = f".loom{next(_module_ids)}"
    symbols: dict[str, str] = {}
    for fn in mod.functions:
        if not fn.is_declaration and fn.linkage == llvm.Linkage.external:
            symbols[fn.name] = fn.name + suffix
            fn.name = symbols[fn.name]
    return symbols


def _link_externals(mod: llvm.ModuleRef) -> None:
    """Resolve the functions the module declares, before code generation: nothing gets
    linked against a missing symbol."""
    externals = [fn.name for fn in mod.functions if fn.is_declaration and not fn.name.startswith("llvm.")]
    _resolve_symbols(externals)
    missing = [name for name in externals if not llvm.address_of_symbol(name)]
    if missing:
        raise LoomError(f"JIT: unresolved external functions: {', '.join(missing)}")


def compile_ir(llvm_ir: str, timings: Timings | None = None) -> JITModule:
    """Parse, optimize (O3, host CPU) and JIT-compile `llvm_ir`. With `timings`, the CPU
    and wall seconds of each stage go into it: `LLVM parse` (and verify), `LLVM O3`,
    `machine code` (code generation and linking, and the optimized IR's text)."""
    with _lock:
        _free_retired()
        host = _get_host()
        with timed(timings, "LLVM parse"):
            mod = _parse(llvm_ir, host)
        with timed(timings, "LLVM O3"):
            _run_o3(mod, host)
        with timed(timings, "machine code"):
            optimized = str(mod)
            symbols = _export_names(mod)
            _link_externals(mod)
            objects: list[bytes] = []

            def on_object(_module: llvm.ModuleRef, obj: bytes) -> None:
                """MCJIT compiled the module (it links it next): resolve what the object needs."""
                objects.append(obj)
                _resolve_symbols(undefined_symbols(obj))

            engine = llvm.create_mcjit_compiler(mod, host.new_target_machine())
            # from here on, jit_module frees the engine when dropped
            jit_module = JITModule(engine, optimized, symbols, b"", host.cpu)
            engine.set_object_cache(notify_func=on_object)
            engine.finalize_object()  # codegen → on_object → link
        jit_module.object_code = obj = objects[-1] if objects else b""
        unresolved = [n for n in undefined_symbols(obj) if not llvm.address_of_symbol(n)]
        if unresolved:  # linked against null: never hand out an address into it
            raise LoomError(f"JIT: the compiled code needs symbols found nowhere: {', '.join(unresolved)}")
        return jit_module

"""The JIT: LLVM IR text → O3 for the host CPU → machine code in one MCJIT engine.

One process-wide llvmlite MCJIT engine, created on first use, with a target machine for
the host (its CPU name and features, opt level 3). Each module is parsed, given the
host's triple and data layout, optimized with LLVM's new pass manager at O3 (loop and
SLP vectorization on), then added to the engine.

    optimize(ir_text) -> str          the optimized IR, for tests and --remarks
    compile_ir(ir_text) -> JITModule  .function_address(name), .optimized_ir, .asm()

Every module's exported functions are renamed to a unique symbol inside the engine, so
two modules may both define `@kernel`; `JITModule.function_address("kernel")` finds its
own. External symbols are resolved from the running process (libc, libm) and libgcc_s:
those the IR declares (aligned_alloc, free, erff) before code generation, and those code
generation introduces (memset, sincosf, __powisf2) from the object file's undefined
symbols, before MCJIT links it. A symbol found nowhere is a LoomError, never a call
through a null pointer.

LLVM's global context is not thread-safe: all work on LLVM objects holds one lock.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import itertools
import struct
import threading
from dataclasses import dataclass, field

import llvmlite.binding as llvm

from compiler.diagnostics import LoomError

_lock = threading.RLock()
_engine: _Engine | None = None
_module_ids = itertools.count()


@dataclass
class _Engine:
    target_machine: llvm.TargetMachine
    engine: llvm.ExecutionEngine
    resolved: set[str] = field(default_factory=set)
    last_object: bytes = b""  # object code of the module being finalized


def _get_engine() -> _Engine:
    """The process-wide engine (created on first use). Call with _lock held."""
    global _engine
    if _engine is None:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        llvm.initialize_native_asmparser()
        target = llvm.Target.from_default_triple()
        tm = target.create_target_machine(
            cpu=llvm.get_host_cpu_name(),
            features=llvm.get_host_cpu_features().flatten(),
            opt=3,
            jit=True,
        )
        backing = llvm.parse_assembly("")
        backing.triple = tm.triple
        backing.data_layout = str(tm.target_data)
        engine = _Engine(tm, llvm.create_mcjit_compiler(backing, tm))
        engine.engine.set_object_cache(notify_func=lambda _module, obj: _on_object(engine, obj))
        _engine = engine
    return _engine


def _on_object(engine: _Engine, obj: bytes) -> None:
    """MCJIT compiled a module (it links it next): resolve what the object needs."""
    engine.last_object = obj
    _resolve_symbols(engine, undefined_symbols(obj))


@functools.cache
def _symbol_libraries() -> list[ctypes.CDLL]:
    libraries = [ctypes.CDLL(None)]  # the process: libc, libm
    gcc_s = ctypes.util.find_library("gcc_s")  # compiler builtins: __powisf2, __divti3, …
    if gcc_s:
        try:
            libraries.append(ctypes.CDLL(gcc_s))
        except OSError:
            pass
    return libraries


def _resolve_symbols(engine: _Engine, names: list[str]) -> None:
    """Make the named symbols visible to the JIT's linker, where they can be found."""
    for name in names:
        if name in engine.resolved:
            continue
        if llvm.address_of_symbol(name) is None:
            for library in _symbol_libraries():
                if hasattr(library, name):
                    llvm.add_symbol(name, ctypes.cast(getattr(library, name), ctypes.c_void_p).value)
                    break
            else:
                continue  # reported by the caller
        engine.resolved.add(name)


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


def _parse(llvm_ir: str, engine: _Engine) -> llvm.ModuleRef:
    try:
        mod = llvm.parse_assembly(llvm_ir)
        mod.verify()
    except RuntimeError as e:
        raise LoomError(f"invalid LLVM IR: {str(e).strip()}") from None
    mod.triple = engine.target_machine.triple
    mod.data_layout = str(engine.target_machine.target_data)
    return mod


def _run_o3(mod: llvm.ModuleRef, engine: _Engine) -> None:
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pto.loop_interleaving = True
    pb = llvm.create_pass_builder(engine.target_machine, pto)
    pb.getModulePassManager().run(mod, pb)


def optimize(llvm_ir: str) -> str:
    """`llvm_ir` optimized at O3 for the host CPU, as text."""
    with _lock:
        engine = _get_engine()
        mod = _parse(llvm_ir, engine)
        _run_o3(mod, engine)
        return str(mod)


class JITModule:
    """A module compiled into the process-wide engine (it stays loaded while the process
    lives; this object keeps the llvmlite module referenced)."""

    def __init__(self, module: llvm.ModuleRef, optimized_ir: str, symbols: dict[str, str], engine: _Engine, obj: bytes):
        self._module = module
        self._symbols = symbols
        self._engine = engine
        self._asm: str | None = None
        self.optimized_ir = optimized_ir
        self.object_code = obj  # the relocatable object MCJIT linked (ELF on Linux)

    @property
    def functions(self) -> list[str]:
        """Names of the functions this module defines and exports."""
        return sorted(self._symbols)

    def function_address(self, name: str) -> int:
        """Address of the compiled function `name` (as written in the IR)."""
        if name not in self._symbols:
            raise LoomError(f"no function '{name}' in this module (it has: {', '.join(self.functions) or 'none'})")
        with _lock:
            address = self._engine.engine.get_function_address(self._symbols[name])
        if not address:
            raise LoomError(f"function '{name}' did not link")
        return address

    def asm(self) -> str:
        """Assembly of the optimized module for the host CPU."""
        with _lock:
            if self._asm is None:
                fresh = llvm.parse_assembly(self.optimized_ir)  # codegen mutates its input
                fresh.triple = self._engine.target_machine.triple
                self._asm = self._engine.target_machine.emit_assembly(fresh)
            return self._asm


def compile_ir(llvm_ir: str) -> JITModule:
    """Parse, optimize (O3, host CPU) and JIT-compile `llvm_ir`."""
    with _lock:
        engine = _get_engine()
        mod = _parse(llvm_ir, engine)
        _run_o3(mod, engine)
        optimized = str(mod)
        suffix = f".loom{next(_module_ids)}"
        symbols: dict[str, str] = {}
        externals: list[str] = []
        for fn in mod.functions:
            if fn.is_declaration:
                if not fn.name.startswith("llvm."):
                    externals.append(fn.name)
            elif fn.linkage == llvm.Linkage.external:
                symbols[fn.name] = fn.name + suffix
                fn.name = symbols[fn.name]
        _resolve_symbols(engine, externals)
        missing = [name for name in externals if not llvm.address_of_symbol(name)]
        if missing:  # before code generation: nothing gets linked against a missing symbol
            raise LoomError(f"JIT: unresolved external functions: {', '.join(missing)}")
        engine.last_object = b""
        engine.engine.add_module(mod)
        engine.engine.finalize_object()  # codegen → _on_object → link
        unresolved = [n for n in undefined_symbols(engine.last_object) if not llvm.address_of_symbol(n)]
        if unresolved:  # linked against null: never hand out an address into it
            raise LoomError(f"JIT: the compiled code needs symbols found nowhere: {', '.join(unresolved)}")
        return JITModule(mod, optimized, symbols, engine, engine.last_object)

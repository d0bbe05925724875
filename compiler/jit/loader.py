"""Machine code from a relocatable object file, loaded without LLVM: how a kernel found in
the disk cache (compiler/jit/disk_cache.py) runs in a few milliseconds.

What MCJIT makes of a kernel (compiler/jit/engine.py) is, on x86-64 Linux, an ELF64
relocatable object in the large code model: every reference to a symbol, the module's
own functions and constants or an external one (memset, libgomp, the buffer pool), is a
64-bit absolute address (R_X86_64_64). Loading it takes what a static linker does for
one object: map its allocated sections (code read+execute, constants read-only, data
read+write, each on pages of its own), write each relocation's value, look the entry
points up in its symbol table. That costs a fraction of a millisecond; LLVM's way
(import llvmlite.binding, an execution engine, `add_object_file`) costs 20 to 30 ms,
more than the whole budget of a cache hit. An object this loader cannot take (another
machine or format, a relocation or section kind it does not know) raises `Unsupported`,
and the cache loads it through LLVM instead (`compiler.jit.engine.load_object`).

    load(obj, symbols, ...) -> LoadedModule    .function_address(name), like a JITModule
    symbol_address(name) -> int | None          an external symbol: one registered, the
                                                process (libc, libm), libgomp, libgcc_s
    register_symbols(names, address_of)         the runtime's own functions (the buffer pool's)

External symbols resolve as the JIT resolves them (compiler/jit/engine.py asks the same
table): first the symbols the runtime registered (the buffer pool registers its
functions, compiled or loaded once per process: compiler/jit/pool.py, as numba's
runtime registers its NRT functions with the JIT), then the process, libgomp, and
libgcc_s (compiler builtins). A symbol found nowhere is a LoomError: the code is never
linked against a null address.

`LOCK` is the one lock of code generation and loading: compiler.jit.engine's (LLVM's
global context is not thread-safe) and the buffer pool's creation, so that loading the
pool from the disk cache and compiling it can never deadlock against each other.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import struct
import threading
from collections.abc import Callable, Iterable

from passes.support.diagnostics import LoomError
from passes.support.target import find_library, openmp_runtime

LOCK = threading.RLock()

_ELF_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_SECTION = struct.Struct("<IIQQQQIIQQ")
_SYMBOL = struct.Struct("<IBBHQQ")
_RELA = struct.Struct("<QQq")
_U64 = struct.Struct("<Q")
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")

_ET_REL, _EM_X86_64 = 1, 62
_SHT_PROGBITS, _SHT_SYMTAB, _SHT_RELA, _SHT_NOBITS, _SHT_REL = 1, 2, 4, 8, 9
_SHT_X86_64_UNWIND = 0x70000001  # .eh_frame: unwind tables, which no kernel needs (nothing unwinds through one)
_SHF_WRITE, _SHF_ALLOC, _SHF_EXECINSTR, _SHF_TLS = 0x1, 0x2, 0x4, 0x400
_SHN_UNDEF, _SHN_LORESERVE, _SHN_ABS = 0, 0xFF00, 0xFFF1
_STT_SECTION = 3
#: the relocations this loader applies: R_X86_64_64 (S + A), R_X86_64_PC32 and
#: R_X86_64_PLT32 (S + A - P, 32-bit: within the object's own mapping), R_X86_64_PC64
_R_64, _R_PC32, _R_PLT32, _R_PC64 = 1, 2, 4, 24
_PAGE = mmap.PAGESIZE
_MAX_BYTES = 1 << 30  # no kernel's sections come near: a table that says so is broken


class Unsupported(Exception):
    """A well-formed object this loader does not load (LLVM's loader may): not an ELF64
    x86-64 relocatable object, or one with a section or relocation kind it does not
    handle."""


class Malformed(ValueError):
    """An ELF64 x86-64 object whose tables point outside it or contradict each other:
    loaded by no one (LLVM's loader is not given it: it trusts its input)."""


# --------------------------------------------------------------------------- external symbols


@functools.cache
def _process() -> ctypes.CDLL:
    return ctypes.CDLL(None)  # libc, libm and whatever else the process has loaded


@functools.cache
def _gcc_s() -> ctypes.CDLL | None:
    """libgcc_s, for the compiler builtins code generation may call (__powisf2, __divti3);
    looked for only when a symbol is not in the process (find_library runs ldconfig)."""
    return find_library("gcc_s")


#: symbol -> the function that gives its address: the runtime's own (register_symbols)
_registered: dict[str, Callable[[str], int]] = {}


def register_symbols(names: Iterable[str], address_of: Callable[[str], int]) -> None:
    """Resolve each of `names` to `address_of(name)`, asked when code that needs it is
    first linked or loaded (under `LOCK`), before the process's own symbols."""
    for name in names:
        _registered[name] = address_of


def is_registered(name: str) -> bool:
    """Whether `name` is one of the runtime's own symbols (`register_symbols`)."""
    return name in _registered


def symbol_address(name: str) -> int | None:
    """The address of external symbol `name`, or None where it is found nowhere."""
    if name in _registered:
        return _registered[name](name)
    for library in (_process, openmp_runtime, _gcc_s):
        lib = library()
        if lib is not None and hasattr(lib, name):
            return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    return None


# --------------------------------------------------------------------------- pages


@functools.cache
def _libc():
    """mmap, mprotect and munmap with their C signatures (a CDLL of its own: the
    prototypes set here change no one else's)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mprotect.restype = ctypes.c_int
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.munmap.restype = ctypes.c_int
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return libc


class _Pages:
    """Anonymous pages, read+write until `protect`; unmapped when dropped."""

    def __init__(self, size: int):
        self.size = size
        address = _libc().mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                               -1, 0)
        if address in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap failed")
        self.address: int | None = address

    def protect(self, offset: int, size: int, prot: int) -> None:
        if size and _libc().mprotect(self.address + offset, size, prot) != 0:
            raise OSError(ctypes.get_errno(), "mprotect failed")

    def free(self) -> None:
        address, self.address = self.address, None
        if address is not None:
            _libc().munmap(address, self.size)

    def __del__(self) -> None:
        # munmap is safe from any thread; the code is unreachable once its module is garbage
        if _libc is not None:  # None: the interpreter is exiting
            self.free()


# --------------------------------------------------------------------------- ELF


def _pages_for(size: int) -> int:
    """`size` rounded up to whole pages."""
    return -(-size // _PAGE) * _PAGE


class _Object:
    """The parts of an ELF64 x86-64 relocatable object the loader uses, checked for bounds."""

    def __init__(self, data: bytes):
        if len(data) < _ELF_HEADER.size or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise Unsupported("not a 64-bit little-endian ELF object")
        header = _ELF_HEADER.unpack_from(data)
        e_type, e_machine, shoff, shentsize, shnum = header[1], header[2], header[6], header[11], header[12]
        if e_type != _ET_REL or e_machine != _EM_X86_64:
            raise Unsupported(f"not an x86-64 relocatable object (type {e_type}, machine {e_machine})")
        if shentsize != _SECTION.size or shoff + shnum * shentsize > len(data):
            raise Malformed("the section table lies outside the file")
        self.data = data
        self.sections = [_SECTION.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
        for _name, kind, _flags, _addr, offset, size, *_ in self.sections:
            if kind != _SHT_NOBITS and offset + size > len(data):
                raise Malformed("a section lies outside the file")
        symtabs = [s for s in self.sections if s[1] == _SHT_SYMTAB]
        if len(symtabs) != 1:
            raise Malformed(f"{len(symtabs)} symbol tables")
        symtab = symtabs[0]
        if symtab[6] >= shnum or symtab[9] != _SYMBOL.size or symtab[5] % _SYMBOL.size:
            raise Malformed("a malformed symbol table")
        self.strtab = self.sections[symtab[6]]
        self.symbols = [_SYMBOL.unpack_from(data, symtab[4] + i) for i in range(0, symtab[5], _SYMBOL.size)]

    def symbol_name(self, symbol: tuple) -> str:
        """A symbol's name, from the string table (Malformed where it points outside it)."""
        if not symbol[0]:
            return ""
        start, size = self.strtab[4], self.strtab[5]
        end = self.data.find(b"\0", start + symbol[0], start + size)
        if symbol[0] >= size or end < 0:
            raise Malformed("a symbol's name lies outside the string table")
        return self.data[start + symbol[0] : end].decode(errors="replace")


def _loaded_sections(obj: _Object) -> dict[int, tuple[int, int, int]]:
    """Section index -> (kind, flags, size) of each section that goes into memory: the
    allocated code, constants and data, not the unwind tables. Unsupported for a kind
    that needs more than copying (thread-local data, constructors' arrays) or pages
    both writable and executable."""
    loaded = {}
    for i, (_name, kind, flags, _addr, _offset, size, _link, _info, align, _entsize) in enumerate(obj.sections):
        if not flags & _SHF_ALLOC or kind == _SHT_X86_64_UNWIND:
            continue
        writable_code = flags & _SHF_WRITE and flags & _SHF_EXECINSTR
        if kind not in (_SHT_PROGBITS, _SHT_NOBITS) or flags & _SHF_TLS or writable_code or align > _PAGE:
            raise Unsupported(f"section kind {kind:#x} (flags {flags:#x})")
        loaded[i] = (kind, flags, size)
    return loaded


def _layout(obj: _Object, loaded: dict[int, tuple[int, int, int]]) -> tuple[dict[int, int], list[tuple[int, int, int]]]:
    """Each loaded section's offset in one mapping, code first, then constants, then
    data, each group on pages of its own; and (offset, size, protection) per group."""
    groups = (
        (lambda f: f & _SHF_EXECINSTR, mmap.PROT_READ | mmap.PROT_EXEC),
        (lambda f: not f & (_SHF_EXECINSTR | _SHF_WRITE), mmap.PROT_READ),
        (lambda f: f & _SHF_WRITE, mmap.PROT_READ | mmap.PROT_WRITE),
    )
    offsets: dict[int, int] = {}
    protections = []
    end = 0
    for member, prot in groups:
        start = end = _pages_for(end)
        for i, (_kind, flags, size) in loaded.items():
            if member(flags):
                align = max(obj.sections[i][8], 1)
                end = -(-end // align) * align
                offsets[i] = end
                end += size
        protections.append((start, end - start, prot))
    return offsets, protections


def _symbol_value(obj: _Object, index: int, bases: dict[int, int], cache: dict[int, int]) -> int:
    """S of a relocation against symbol `index`: its address once loaded, an external
    one's from `symbol_address`."""
    if index in cache:
        return cache[index]
    if index >= len(obj.symbols):
        raise Malformed("a relocation names no symbol")
    symbol = obj.symbols[index]
    shndx, value = symbol[3], symbol[4]
    if shndx == _SHN_UNDEF:
        name = obj.symbol_name(symbol)
        address = symbol_address(name)
        if not address:
            raise LoomError(f"the cached machine code needs a symbol found nowhere: {name}")
    elif shndx == _SHN_ABS:
        address = value
    elif shndx in bases:
        address = bases[shndx] + value
    else:
        raise Unsupported(f"a relocation against a symbol of section {shndx}, which is not loaded")
    cache[index] = address
    return address


def _relocate(obj: _Object, image: bytearray, base: int, offsets: dict[int, int]) -> None:
    """Apply every relocation of a loaded section to `image` (the mapping's contents,
    the mapping at `base`)."""
    bases = {i: base + off for i, off in offsets.items()}
    values: dict[int, int] = {}
    for _name, kind, _flags, _addr, offset, size, _link, target, _align, entsize in obj.sections:
        if kind == _SHT_REL and target in offsets:
            raise Unsupported("REL relocations")
        if kind != _SHT_RELA or target not in offsets:
            continue
        if entsize != _RELA.size or size % _RELA.size:
            raise Malformed("a malformed relocation table")
        section_size = obj.sections[target][5]
        for r_offset, r_info, addend in _RELA.iter_unpack(obj.data[offset : offset + size]):
            r_type = r_info & 0xFFFFFFFF
            if r_type not in (_R_64, _R_PC64, _R_PC32, _R_PLT32):
                raise Unsupported(f"relocation type {r_type}")
            width = 8 if r_type in (_R_64, _R_PC64) else 4
            if r_offset + width > section_size:
                raise Malformed("a relocation outside its section")
            at = offsets[target] + r_offset
            value = _symbol_value(obj, r_info >> 32, bases, values) + addend
            if r_type == _R_64:
                _U64.pack_into(image, at, value & 0xFFFFFFFFFFFFFFFF)
            elif r_type == _R_PC64:
                _I64.pack_into(image, at, value - (base + at))
            else:  # R_X86_64_PC32, R_X86_64_PLT32
                delta = value - (base + at)
                if not -(2**31) <= delta < 2**31:
                    raise Unsupported("a 32-bit PC-relative relocation out of range")
                _I32.pack_into(image, at, delta)


def _map(obj: _Object) -> tuple[_Pages, dict[int, int]]:
    """The object's sections in memory, relocated and protected; and each loaded
    section's address."""
    loaded = _loaded_sections(obj)
    offsets, protections = _layout(obj, loaded)
    last_offset, last_size, _ = protections[-1]
    size = _pages_for(max(last_offset + last_size, 1))
    if size > _MAX_BYTES:
        raise Malformed(f"{size} bytes of sections")
    pages = _Pages(size)
    image = bytearray(size)
    for i, (kind, _flags, sec_size) in loaded.items():
        if kind == _SHT_PROGBITS:
            start = obj.sections[i][4]
            image[offsets[i] : offsets[i] + sec_size] = obj.data[start : start + sec_size]
    _relocate(obj, image, pages.address, offsets)
    ctypes.memmove(pages.address, (ctypes.c_char * size).from_buffer(image), size)
    for offset, length, prot in protections:
        pages.protect(offset, _pages_for(length), prot)
    return pages, {i: pages.address + off for i, off in offsets.items()}


# --------------------------------------------------------------------------- modules


class LoadedModule:
    """Machine code loaded from an object file: what a JITModule is to a compile
    (compiler/jit/engine.py), for code read back from the disk cache. Its pages live as
    long as this object; an address taken from it is valid only while it is alive."""

    def __init__(self, pages: _Pages, addresses: dict[str, int], optimized_ir: str, obj: bytes, cpu: str):
        self._pages: _Pages | None = pages
        self._addresses = addresses
        self.optimized_ir = optimized_ir
        self.object_code = obj
        self.cpu = cpu

    @property
    def functions(self) -> list[str]:
        """Names of the functions this module exports."""
        return sorted(self._addresses)

    def function_address(self, name: str) -> int:
        """Address of function `name` (as written in the IR), valid while this is alive."""
        if name not in self._addresses:
            raise LoomError(f"no function '{name}' in this module (it has: {', '.join(self.functions) or 'none'})")
        if self._pages is None:
            raise LoomError("this module's machine code was freed (LoadedModule.close())")
        return self._addresses[name]

    def close(self) -> None:
        """Free the machine code now: no address of this module may be called after."""
        pages, self._pages = self._pages, None
        if pages is not None:
            pages.free()


def load(obj: bytes, symbols: dict[str, str], optimized_ir: str = "", cpu: str = "") -> LoadedModule:
    """Load object file `obj`; `symbols` maps each exported function's name (as the IR
    writes it) to its symbol in the object. Unsupported for an object this loader does
    not take (compiler.jit.engine.load_object may); Malformed for one whose tables are
    broken; a LoomError for an external symbol found nowhere; OSError where the system
    refuses executable pages."""
    try:
        parsed = _Object(obj)
    except (struct.error, IndexError) as e:
        raise Malformed(str(e)) from None
    defined = {}
    for symbol in parsed.symbols:
        if symbol[3] != _SHN_UNDEF and symbol[3] < _SHN_LORESERVE and symbol[1] & 0xF != _STT_SECTION:
            defined[parsed.symbol_name(symbol)] = symbol
    missing = [name for name, sym in symbols.items() if sym not in defined]
    if missing:
        raise Malformed(f"the object does not define {', '.join(missing)}")
    pages, bases = _map(parsed)
    addresses = {}
    for name, sym in symbols.items():
        symbol = defined[sym]
        if symbol[3] not in bases or symbol[4] >= parsed.sections[symbol[3]][5]:
            raise Malformed(f"{sym} is not in a loaded section")
        addresses[name] = bases[symbol[3]] + symbol[4]
    return LoadedModule(pages, addresses, optimized_ir, obj, cpu)

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
more than the whole budget of a cache hit.

It is also the only loader a cached object meets. LLVM's trusts its input: an object
whose header names another class, byte order or machine, or whose tables point outside
it, crashed the process. This one reads the object in Python and checks every table
before it reads through it (`_Object`): the header against what a compiler writes, the
sections within the file and apart, the symbol and string tables, each relocation's
kind, symbol and place. An object it cannot take raises `Unsupported` (another machine
or format, a relocation or section kind it does not know) or `Malformed` (anything
broken), and the cache compiles the kernel again.

    validate(obj)                               whether load() would take it (raises if not)
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
_SHT_PROGBITS, _SHT_SYMTAB, _SHT_STRTAB, _SHT_RELA, _SHT_NOTE, _SHT_NOBITS, _SHT_REL = 1, 2, 3, 4, 7, 8, 9
_SHT_X86_64_UNWIND = 0x70000001  # .eh_frame: unwind tables, which no kernel needs (nothing unwinds through one)
_SHF_WRITE, _SHF_ALLOC, _SHF_EXECINSTR, _SHF_TLS = 0x1, 0x2, 0x4, 0x400
#: the section flags a compiler writes into such an object: those above, mergeable
#: constants and strings, a relocation section's link to its target, x86-64's large sections
_SHF_KNOWN = _SHF_WRITE | _SHF_ALLOC | _SHF_EXECINSTR | _SHF_TLS | 0x10 | 0x20 | 0x40 | 0x10000000
_SHN_UNDEF, _SHN_LORESERVE, _SHN_ABS = 0, 0xFF00, 0xFFF1
_STT_SECTION = 3
#: the relocations this loader applies, and the bytes each writes: R_X86_64_64 (S + A),
#: R_X86_64_PC32 and R_X86_64_PLT32 (S + A - P, 32-bit: within the object's own mapping),
#: R_X86_64_PC64
_R_64, _R_PC32, _R_PLT32, _R_PC64 = 1, 2, 4, 24
_WIDTH = {_R_64: 8, _R_PC64: 8, _R_PC32: 4, _R_PLT32: 4}
_PAGE = mmap.PAGESIZE
_MAX_BYTES = 1 << 30  # no kernel's sections come near: a table that says so is broken


class Unsupported(Exception):
    """A well-formed object this loader does not load: not an ELF64 x86-64 relocatable
    object, or one with a section or relocation kind it does not handle."""


class Malformed(ValueError):
    """An ELF64 x86-64 object whose tables point outside it, overlap or contradict each
    other, or hold values no compiler writes: loaded by no one."""


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
    """An ELF64 x86-64 relocatable object, every table checked before anything is read
    through it: the header holds what a compiler writes for such an object; the section
    table, each section's bytes, the header and one another lie within the file without
    overlapping; the symbol table and its string table are whole, each symbol's name
    ends within the strings and each defined symbol lies within its section; each
    relocation names a symbol of the table, is of a kind this loader applies and writes
    within its section. Malformed where any check fails (whatever struct or indexing
    would raise included), Unsupported for another kind of object."""

    def __init__(self, data: bytes):
        try:
            self._read(data)
        except (struct.error, IndexError) as e:
            raise Malformed(str(e)) from None

    def _read(self, data: bytes) -> None:
        if len(data) < _ELF_HEADER.size or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise Unsupported("not a 64-bit little-endian ELF object")
        (ident, e_type, machine, version, entry, phoff, shoff, flags, ehsize, phentsize, phnum, shentsize, shnum,
         shstrndx) = _ELF_HEADER.unpack_from(data)
        if e_type != _ET_REL or machine != _EM_X86_64:
            raise Unsupported(f"not an x86-64 relocatable object (type {e_type}, machine {machine})")
        if ident[6] != 1 or any(ident[7:]) or version != 1 or entry or phoff or flags or phentsize or phnum \
                or ehsize != _ELF_HEADER.size:
            raise Malformed("an ELF header no compiler writes for a relocatable object")
        if shentsize != _SECTION.size or not 0 < shstrndx < shnum < _SHN_LORESERVE or shoff % 8 \
                or shoff < _ELF_HEADER.size or shoff + shnum * shentsize > len(data):
            raise Malformed("the section table lies outside the file")
        self.data = data
        self.sections = [_SECTION.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
        if any(self.sections[0]):
            raise Malformed("section 0 is not the null section")
        spans = [(0, _ELF_HEADER.size), (shoff, shoff + shnum * shentsize)]
        for i, (_name, kind, sh_flags, address, offset, size, link, _info, align, _entsize) in \
                enumerate(self.sections[1:], 1):
            if address or align & (align - 1) or sh_flags & ~_SHF_KNOWN or link >= shnum:
                raise Malformed(f"section {i} has an address, alignment, flags or link no compiler writes")
            if kind != _SHT_NOBITS and size:
                if offset + size > len(data) or (align and offset % align):
                    raise Malformed(f"section {i} lies outside the file")
                spans.append((offset, offset + size))
        spans.sort()
        if any(end > start for (_, end), (start, _) in zip(spans, spans[1:])):
            raise Malformed("sections overlap")
        self._check_names(self.sections[shstrndx], [s[0] for s in self.sections], "section")
        symtabs = [i for i, s in enumerate(self.sections) if s[1] == _SHT_SYMTAB]
        if len(symtabs) != 1:
            raise Malformed(f"{len(symtabs)} symbol tables")
        symtab = self.sections[symtabs[0]]
        if symtab[9] != _SYMBOL.size or symtab[5] % _SYMBOL.size or not symtab[5]:
            raise Malformed("a malformed symbol table")
        self.strtab = self.sections[symtab[6]]
        self.symbols = [_SYMBOL.unpack_from(data, symtab[4] + i) for i in range(0, symtab[5], _SYMBOL.size)]
        if any(self.symbols[0]) or symtab[7] > len(self.symbols):
            raise Malformed("a malformed symbol table")
        self._check_names(self.strtab, [s[0] for s in self.symbols], "symbol")
        for symbol in self.symbols[1:]:
            shndx, value, size = symbol[3], symbol[4], symbol[5]
            if shndx == _SHN_UNDEF:
                if value or size or not symbol[0]:
                    raise Malformed("an undefined symbol with a value or without a name")
            elif shndx != _SHN_ABS and (shndx >= shnum or value + size > self.sections[shndx][5]):
                raise Malformed("a symbol outside its section")
        for i, (_name, kind, _flags, _addr, offset, size, link, target, _align, entsize) in enumerate(self.sections):
            if kind not in (_SHT_RELA, _SHT_REL):
                continue
            if link != symtabs[0] or not 0 < target < shnum or self.sections[target][1] == _SHT_NOBITS:
                raise Malformed(f"relocation section {i} does not link the symbol table to a section")
            if kind == _SHT_REL:
                raise Unsupported("REL relocations")
            if entsize != _RELA.size or size % _RELA.size:
                raise Malformed("a malformed relocation table")
            section_size = self.sections[target][5]
            for r_offset, r_info, _addend in _RELA.iter_unpack(data[offset : offset + size]):
                r_type, r_symbol = r_info & 0xFFFFFFFF, r_info >> 32
                if r_type not in _WIDTH:
                    raise Unsupported(f"relocation type {r_type}")
                if r_symbol >= len(self.symbols) or r_offset + _WIDTH[r_type] > section_size:
                    raise Malformed("a relocation outside its section or naming no symbol")

    def _check_names(self, strings: tuple, names: list[int], what: str) -> None:
        """Each of `names` (offsets) starts within `strings` (a string table), which ends
        with a NUL: each name ends within it."""
        if strings[1] != _SHT_STRTAB or not strings[5] or self.data[strings[4] + strings[5] - 1] != 0:
            raise Malformed(f"the {what} names' string table is not one")
        if any(name >= strings[5] for name in names):
            raise Malformed(f"a {what}'s name lies outside its string table")

    def symbol_name(self, symbol: tuple) -> str:
        """A symbol's name, from the string table."""
        start = self.strtab[4] + symbol[0]
        return self.data[start : self.data.index(b"\0", start)].decode(errors="replace")


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
    the mapping at `base`); the tables were checked by `_Object`."""
    bases = {i: base + off for i, off in offsets.items()}
    values: dict[int, int] = {}
    for _name, kind, _flags, _addr, offset, size, _link, target, _align, _entsize in obj.sections:
        if kind != _SHT_RELA or target not in offsets:
            continue
        for r_offset, r_info, addend in _RELA.iter_unpack(obj.data[offset : offset + size]):
            r_type = r_info & 0xFFFFFFFF
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


def validate(obj: bytes) -> None:
    """Whether `load` would take `obj` (Unsupported, Malformed where not), without
    mapping anything: what the disk cache asks of an object before it files it."""
    _loaded_sections(_Object(obj))


def load(obj: bytes, symbols: dict[str, str], optimized_ir: str = "", cpu: str = "") -> LoadedModule:
    """Load object file `obj`; `symbols` maps each exported function's name (as the IR
    writes it) to its symbol in the object. Unsupported for an object this loader does
    not take; Malformed for one whose tables are broken (`_Object`), or whose exported
    functions are not code; a LoomError for an external symbol found nowhere; OSError
    where the system refuses executable pages. Nothing but this module's Python reads
    the object: a broken file raises, it never crashes the process."""
    parsed = _Object(obj)
    defined = {}
    for symbol in parsed.symbols:
        if symbol[3] != _SHN_UNDEF and symbol[3] < _SHN_LORESERVE and symbol[1] & 0xF != _STT_SECTION:
            defined[parsed.symbol_name(symbol)] = symbol
    missing = [name for name, sym in symbols.items() if sym not in defined]
    if missing:
        raise Malformed(f"the object does not define {', '.join(missing)}")
    try:
        pages, bases = _map(parsed)
    except struct.error as e:  # a relocation's value beyond its width
        raise Malformed(str(e)) from None
    addresses = {}
    for name, sym in symbols.items():
        symbol = defined[sym]
        if symbol[3] not in bases or symbol[4] >= parsed.sections[symbol[3]][5] \
                or not parsed.sections[symbol[3]][2] & _SHF_EXECINSTR:
            raise Malformed(f"{sym} is not in a loaded section of code")
        addresses[name] = bases[symbol[3]] + symbol[4]
    return LoadedModule(pages, addresses, optimized_ir, obj, cpu)

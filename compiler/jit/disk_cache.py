"""Loom's directory on disk, and the compiled kernels kept in it for later processes.

    cache_dir() -> Path          created on first use, private to the user (mode 0700)
    disk_cache                   compile()'s second level (compiler/driver.py): .load(key), .store(key, kernel)
    runtime_code(name, ir)       a runtime module's machine code (the buffer pool's), cached the same way

A compile costs 0.1 to 1 s (xDSL's passes, LLVM's O3 and code generation); a kernel read
back from the disk costs a few milliseconds: its object file is loaded without LLVM
(compiler/jit/loader.py), its interface and IR texts come from the entry.

The key. An entry is found by the SHA-256 of everything the machine code depends on:
Loom's version and the contents of its source files (compiler/, passes/, dialects/: an
edited pass never serves stale code), xDSL's and llvmlite's (LLVM's) versions, the CPU
(its vendor, family, model, stepping and feature flags as the OS reports them: the
CPUID facts LLVM's host CPU name and features come from), the cache sizes and thread
count the default pipeline plans for, whether libgomp is there, and compile()'s
arguments (the source text, filename, entry, pipeline, num_threads, remarks, stages)
with `LOOM_TARGET`. The digest is of the files as this process imported them: where
one changed since (its size or mtime, what Python itself checks: `session.IMPORTED_SOURCES`),
the process may run the old code while the files describe the new, and it neither loads
another process's kernels (built from the new code) nor stores its own (they would be
filed under the new code's key): the disk cache is off in it, with a warning.

An entry (`kernels/<key>.loom`) holds: a magic line, a JSON header (the key, the
kernel's interface: entry, argument specs, flops, pipeline, threads, remarks, target
CPU, status and allocation sites; the exported symbols; where each section lies), the
object file, the IR texts zlib-compressed (LLVM IR before and after O3, and with
stages=True each pass's output), and the SHA-256 of all of it. Nothing is unpickled:
an entry is data, read back into a Kernel field by field. An entry that is truncated,
corrupted, of another format or filed under another key is ignored (and replaced by the
next compile, with a `CacheWarning`), never loaded; so is one whose object file
compiler/jit/loader.py refuses: the only loader an entry meets checks every table of
the object before reading through it, so that even a whole, checksummed entry with a
broken object raises there and never crashes the process. Only objects that loader
takes are filed (on x86-64; elsewhere the disk cache keeps no machine code).

Safety. The directory must belong to the user and be writable by no one else (it is
made so: mode 0700, entries 0600); otherwise, or where it cannot be made or written,
the disk cache is off with a warning (`CacheWarning`) and compile() works as before.
Loading machine code from a directory another user can write would run their code.

Concurrency. An entry is written to a temporary file in the same directory, flushed
(fsync) and renamed over its name (os.replace): a reader sees the whole old entry or the
whole new one, never a part, whatever other processes do at the same time.

Size. `LOOM_CACHE_MAX_BYTES` (default 256M; K, M and G suffixes; 0 turns the disk cache
off) bounds the directory: past it, a store removes the entries used longest ago (a hit
touches its entry's mtime) until the cache is back under 90% of the bound.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import warnings
import zlib
from collections import Counter
from pathlib import Path

from compiler.jit import loader
from compiler.jit.kernel import OBJECTS_SUFFIX, AllocationSite, ArgSpec, Kernel, array_data_offset
from compiler.version import __version__
from dialects.dtypes import dtype_named
from passes.support import target
from passes.support.diagnostics import LoomError
from passes.support import session

FORMAT = 1
_MAGIC = b"LOOMKC1\n"
_DIGEST = 32  # SHA-256
_SUFFIX = ".loom"
DEFAULT_MAX_BYTES = 256 << 20
#: a temporary file older than this is a crashed writer's, removed by the next eviction
_STALE_TEMPORARY_S = 3600
#: the /proc/cpuinfo fields that say which CPU this is and what it can do (x86, Arm, RISC-V)
_CPU_FIELDS = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags", "CPU implementer",
               "CPU architecture", "CPU variant", "CPU part", "CPU revision", "Features", "isa", "uarch")


def cache_dir() -> Path:
    """Where Loom keeps what it measured or compiled: `LOOM_CACHE_DIR`, else
    `$XDG_CACHE_HOME/loom`, else `~/.cache/loom`; created (mode 0700) when missing."""
    text = os.environ.get("LOOM_CACHE_DIR", "").strip()
    if text:
        path = Path(text).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME", "").strip()
        path = (Path(base) if base else Path.home() / ".cache") / "loom"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


#: what a header that does not describe a loadable entry raises while it is read back
_UNUSABLE = (ValueError, KeyError, TypeError, AttributeError, IndexError, OverflowError, OSError, LoomError,
             zlib.error, loader.Unsupported)


def unusable(error: Exception) -> str:
    """Why an entry could not be used, from what reading it back raised."""
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


class CacheWarning(UserWarning):
    """The disk cache is off for this process (its directory is unusable), or an entry
    could not be written: compile() works on, without it."""


# --------------------------------------------------------------------------- the key


class SourceState:
    """Loom's source files: a digest of their contents (part of every key), and their
    sizes and mtimes, to see cheaply whether any changed since."""

    def __init__(self, roots: list[str]):
        import hashlib

        digest = hashlib.sha256()
        self.files = session.source_files(roots)
        stamp = []
        for name, path in self.files:
            with open(path, "rb") as f:
                data = f.read()
                st = os.fstat(f.fileno())
            stamp.append((path, st.st_size, st.st_mtime_ns))
            digest.update(f"{name}\0{len(data)}\0".encode())
            digest.update(data)
        self.digest = digest.hexdigest()
        self.stamp = tuple(stamp)

    def as_imported(self) -> bool:
        """The files read are those this process imported (`session.IMPORTED_SOURCES`):
        the digest describes the code it runs."""
        return self.stamp == session.IMPORTED_SOURCES

    def unchanged(self) -> bool:
        """No source file changed since this process imported Loom, digest included."""
        return self.as_imported() and session.stamp(self.files) == self.stamp


def cpu_identity() -> str:
    """The CPU, as the OS describes it: /proc/cpuinfo's fields for the first processor
    (vendor, family, model, stepping, feature flags), read without LLVM; where there is
    no /proc, LLVM's host CPU name and features."""
    try:
        with open("/proc/cpuinfo", "rb") as f:
            first = f.read(1 << 16).decode(errors="replace").split("\n\n")[0]
    except OSError:
        first = ""
    fields = {}
    for line in first.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in _CPU_FIELDS:
            fields[name.strip()] = " ".join(value.split())
    if fields:
        return "; ".join(f"{k}={fields[k]}" for k in sorted(fields))
    import llvmlite.binding as llvm

    return f"llvm {llvm.get_host_cpu_name()} {llvm.get_host_cpu_features().flatten()}"


def distribution_version(name: str, package) -> str:
    """The installed version of distribution `name` (whose package is `package`), from
    the name of its .dist-info folder beside the package: importlib.metadata, which
    xdsl.__version__ asks, costs 20 ms to import (a cache hit's whole budget)."""
    folder = Path(package.__file__).parent.parent
    prefix = name.replace("-", "_") + "-"
    try:
        found = sorted(n for n in os.listdir(folder) if n.startswith(prefix) and n.endswith(".dist-info"))
    except OSError:
        found = []
    if found:
        return ",".join(n[len(prefix) : -len(".dist-info")] for n in found)
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def cache_description(root: str = "/sys/devices/system/cpu/cpu0/cache") -> str:
    """What `passes.support.target.cache_sizes()` reads, the cache sizes the default pipeline
    plans for (the type, level and size of each of cpu0's caches), read as plain files:
    through pathlib it costs 1.5 ms."""
    parts = []
    try:
        names = sorted(n for n in os.listdir(root) if n.startswith("index"))
    except OSError:
        names = []
    for name in names:
        for field in ("type", "level", "size"):
            try:
                with open(os.path.join(root, name, field), "rb") as f:
                    parts.append(f.read().strip().decode(errors="replace"))
            except OSError:
                parts.append("?")
    return " ".join(parts)


def _planned_threads() -> int:
    """The threads the default pipeline plans for when neither num_threads nor
    LOOM_TARGET says: `machine()`'s (fixed at its first call), else what it would read."""
    if target.machine.cache_info().currsize:
        return target.machine().threads
    return target.default_threads()


class Fingerprint:
    """What every key of this process shares: Loom's sources and version, its
    dependencies', the CPU's, the runtime's. Made at the first compile."""

    def __init__(self):
        import platform
        import sys

        import llvmlite
        import xdsl

        self.sources = SourceState(session.package_roots())
        self.text = "\n".join([
            f"loom kernel cache format {FORMAT}",
            f"loom {__version__} sources {self.sources.digest}",
            f"xdsl {distribution_version('xdsl', xdsl)} llvmlite {llvmlite.__version__}",
            f"python {sys.implementation.name} {sys.version_info[0]}.{sys.version_info[1]} {platform.machine()}",
            f"cpu {cpu_identity()}",
            f"caches {cache_description()}",
            f"libgomp {target.openmp_runtime() is not None}",
            f"numpy array data at {array_data_offset()}",  # baked into each kernel's objects wrapper
        ])


# --------------------------------------------------------------------------- entries


def _encode_spec(spec) -> dict:
    return {"name": spec.name, "shape": list(spec.shape), "dtype": spec.dtype.name, "is_output": spec.is_output,
            "in_place": spec.in_place, "strides": list(spec.strides), "offset": spec.offset, "type": spec.type}


def _decode_spec(d: dict) -> ArgSpec:
    dtype = dtype_named(str(d["dtype"]))
    if dtype is None:
        raise ValueError(f"dtype {d['dtype']!r}")
    return ArgSpec(str(d["name"]), tuple(int(n) for n in d["shape"]), dtype, bool(d["is_output"]),
                   bool(d["in_place"]), tuple(int(s) for s in d["strides"]), int(d["offset"]), str(d["type"]))


def encode(key: str, header: dict, sections: dict[str, bytes]) -> bytes:
    """An entry: magic, header length, JSON header (with the key and where each section
    lies), the sections, and the SHA-256 of all that."""
    import hashlib
    import json

    offsets, at = {}, 0
    for name, data in sections.items():
        offsets[name] = [at, len(data)]
        at += len(data)
    head = json.dumps({**header, "format": FORMAT, "key": key, "sections": offsets}, separators=(",", ":")).encode()
    body = b"".join([_MAGIC, len(head).to_bytes(4, "little"), head, *sections.values()])
    return body + hashlib.sha256(body).digest()


def decode(key: str, data: bytes) -> tuple[dict, dict[str, bytes]]:
    """The header and sections of an entry; ValueError for anything but a whole entry
    of this format filed under `key`."""
    import hashlib
    import json

    if len(data) < len(_MAGIC) + 4 + _DIGEST or not data.startswith(_MAGIC):
        raise ValueError("not an entry of this format")
    body, digest = data[:-_DIGEST], data[-_DIGEST:]
    if hashlib.sha256(body).digest() != digest:
        raise ValueError("checksum mismatch (truncated or corrupted)")
    start = len(_MAGIC) + 4
    size = int.from_bytes(body[len(_MAGIC) : start], "little")
    header = json.loads(body[start : start + size])
    if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("key") != key:
        raise ValueError("an entry of another format or key")
    base, sections = start + size, {}
    places = header.get("sections")
    for name, place in places.items() if isinstance(places, dict) else ():
        offset, length = (int(n) for n in place)
        if offset < 0 or length < 0 or base + offset + length > len(body):
            raise ValueError("a section outside the entry")
        sections[name] = body[base + offset : base + offset + length]
    if "object" not in sections:
        raise ValueError("no object file in the entry")
    return header, sections


def _texts(sections: dict[str, bytes]) -> dict[str, str]:
    return {name: zlib.decompress(data).decode() for name, data in sections.items() if name != "object"}


def _load_code(header: dict, obj: bytes, optimized_ir: str) -> loader.LoadedModule:
    """The machine code of an entry, by compiler.jit.loader: the only loader a cached
    object meets (it checks every table of the object before it reads through it; LLVM's
    trusts its input, and a malformed file crashed it)."""
    symbols = {str(k): str(v) for k, v in header["symbols"].items()}
    return loader.load(obj, symbols, optimized_ir, str(header["cpu"]))


def _loadable(obj: bytes) -> bool:
    """Whether compiler.jit.loader takes `obj`: what an entry may hold (elsewhere than
    x86-64, nothing: the disk cache keeps no machine code there)."""
    try:
        loader.validate(obj)
    except (loader.Unsupported, loader.Malformed):
        return False
    return True


def kernel_entry(kernel: Kernel) -> tuple[dict, dict[str, bytes]] | None:
    """The header and sections of `kernel`'s entry; None for one whose machine code
    compiler.jit.loader does not take."""
    import json

    module = kernel._module
    obj = getattr(module, "object_code", b"")
    if not _loadable(obj):
        return None
    sites = {str(k): [s.function, s.name, s.type, s.nbytes, s.location] for k, s in kernel.allocation_sites.items()}
    header = {
        "kind": "kernel", "entry": kernel.entry, "inputs": [_encode_spec(s) for s in kernel.inputs],
        "outputs": [_encode_spec(s) for s in kernel.outputs], "flops": kernel.flops, "pipeline": kernel.pipeline,
        "num_threads": kernel.num_threads, "remarks": list(kernel.remarks), "cpu": kernel.target,
        "returns_status": kernel.returns_status, "allocation_sites": sites, "symbols": dict(module.symbols),
    }
    sections = {"object": obj, "llvm_ir": zlib.compress(kernel.llvm_ir.encode(), 6),
                "optimized_ir": zlib.compress(kernel.optimized_ir.encode(), 6)}
    if kernel.stages:
        sections["stages"] = zlib.compress(json.dumps(kernel.stages).encode(), 6)
    return header, sections


def kernel_from_entry(header: dict, sections: dict[str, bytes]) -> Kernel:
    """The Kernel an entry describes, its machine code loaded last (once the rest has
    been read back). One of `_UNUSABLE` for an entry that does not describe one."""
    import json

    if header.get("kind") != "kernel":
        raise ValueError("not a kernel's entry")
    texts = _texts(sections)
    stages = json.loads(texts["stages"]) if "stages" in texts else {}
    num_threads = header["num_threads"]
    fields = dict(
        entry=str(header["entry"]),
        inputs=[_decode_spec(d) for d in header["inputs"]],
        outputs=[_decode_spec(d) for d in header["outputs"]],
        flops=int(header["flops"]),
        llvm_ir=texts["llvm_ir"],
        optimized_ir=texts["optimized_ir"],
        stages={str(k): str(v) for k, v in stages.items()},
        pipeline=str(header["pipeline"]),
        num_threads=None if num_threads is None else int(num_threads),
        remarks=[str(r) for r in header["remarks"]],
        target=str(header["cpu"]),
        returns_status=bool(header["returns_status"]),
        allocation_sites={int(k): AllocationSite(str(f), str(n), str(t), int(b), None if at is None else str(at))
                          for k, (f, n, t, b, at) in header["allocation_sites"].items()},
    )
    module = _load_code(header, sections["object"], fields["optimized_ir"])
    wrapper = fields["entry"] + OBJECTS_SUFFIX
    return Kernel(**fields, address=module.function_address(fields["entry"]), _module=module,
                  objects_address=module.function_address(wrapper) if wrapper in module.functions else 0)


# --------------------------------------------------------------------------- the cache


def max_bytes() -> int:
    """`LOOM_CACHE_MAX_BYTES`: the disk cache's bound (0: off)."""
    text = os.environ.get("LOOM_CACHE_MAX_BYTES", "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1].upper(), 1)
    digits = text[:-1] if scale > 1 else text
    if not (digits.isascii() and digits.isdigit()):
        raise LoomError(f"LOOM_CACHE_MAX_BYTES must be a size in bytes (a non-negative integer, K, M or G "
                        f"suffixes allowed), got {text!r}")
    return int(digits) * scale


class DiskCache:
    """Kernels on disk, for compile() (see the module's docstring). `stats` counts this
    process's hits, misses, rejected entries (corrupted, truncated, foreign), stores and
    evictions."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fingerprint: Fingerprint | None = None
        self._folders: dict[tuple, Path | None] = {}  # where the environment points -> usable folder or None
        self._known_bytes: dict[Path, int] = {}  # the folder's size at this process's last look, plus its stores
        self._warned: set[str] = set()
        self.disabled = False
        self.stats: Counter[str] = Counter()

    def reset(self) -> None:
        """Forget what this process has found out: the fingerprint (read again at the
        next compile, sources included), the folders checked, the sizes seen, the counts."""
        with self._lock:
            self._fingerprint = None
            self._folders.clear()
            self._known_bytes.clear()
            self._warned.clear()
            self.disabled = False
            self.stats.clear()

    def disable(self) -> None:
        """No reads and no writes for the rest of the process (loom-run --no-cache)."""
        self.disabled = True

    # ----------------------------------------------------------------- where

    def folder(self) -> Path | None:
        """The folder of the entries, or None when the disk cache is off."""
        if self.disabled or max_bytes() == 0:
            return None
        where = tuple(os.environ.get(v, "") for v in ("LOOM_CACHE_DIR", "XDG_CACHE_HOME", "HOME"))
        if where not in self._folders:
            self._folders[where] = self._usable_folder()
        return self._folders[where]

    def _usable_folder(self) -> Path | None:
        try:
            folder = cache_dir() / "kernels"
            folder.mkdir(mode=0o700, exist_ok=True)
            for path in (folder.parent, folder):
                why = _unsafe(path)
                if why:
                    self.warn(f"{path} {why}: the kernel cache is off (machine code is never loaded from a folder "
                              "others can write)")
                    return None
            if not os.access(folder, os.W_OK | os.X_OK):
                self.warn(f"{folder} is not writable: the kernel cache is off")
                return None
        except OSError as e:
            self.warn(f"cannot create the kernel cache's folder ({e.strerror or e}): the kernel cache is off")
            return None
        return folder

    def warn(self, message: str) -> None:
        """A CacheWarning, once per message and process."""
        if message not in self._warned:
            self._warned.add(message)
            warnings.warn(message, CacheWarning, stacklevel=2)

    # ----------------------------------------------------------------- keys

    def fingerprint(self) -> Fingerprint:
        """This process's `Fingerprint`, made at the first call. Where Loom's source files
        are no longer those this process imported, its keys would name code it does not
        run: the disk cache is off (with a warning)."""
        with self._lock:
            if self._fingerprint is None:
                self._fingerprint = Fingerprint()
                if not self._fingerprint.sources.as_imported():
                    self.disabled = True
                    self.warn("Loom's source files changed since this process imported them: its kernels may not "
                              "be what they compile to now, so the kernel cache is off in this process (a new "
                              "process uses it)")
            return self._fingerprint

    def key(self, kind: str, *parts) -> str:
        """The key of an entry: the process's fingerprint and `parts` (JSON values)."""
        import hashlib
        import json

        text = self.fingerprint().text + "\n" + json.dumps([kind, *parts], separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def kernel_key(self, source: str, filename: str, entry: str | None, pipeline: str, num_threads: int | None,
                   remarks: bool, stages: bool, loom_target: str) -> str:
        """The key of a compile() (its in-memory key, with the threads it plans for)."""
        threads = num_threads or _planned_threads()
        return self.key("kernel", source, filename, entry, pipeline, num_threads, remarks, stages, loom_target, threads)

    # ----------------------------------------------------------------- read

    def read(self, key: str) -> tuple[dict, dict[str, bytes]] | None:
        """The header and sections of entry `key`, or None: no such entry, or one that
        is not whole, not this format, not filed under `key`, or not the user's."""
        folder = self.folder()
        if folder is None:
            return None
        path = folder / (key + _SUFFIX)
        try:
            with open(path, "rb") as f:
                st = os.fstat(f.fileno())
                if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
                    self.reject(key, "another user's file")
                    return None
                data = f.read()
        except OSError:
            self.stats["miss"] += 1
            return None
        try:
            entry = decode(key, data)
        except _UNUSABLE as e:
            self.reject(key, unusable(e))
            return None
        try:
            os.utime(path)  # used now: the last entry eviction removes
        except OSError:
            pass
        return entry

    def load(self, key: str) -> Kernel | None:
        """The kernel of entry `key`, its machine code loaded, or None (a miss, a
        rejected entry, or machine code that cannot be loaded here)."""
        entry = self.read(key)
        if entry is None:
            return None
        try:
            kernel = kernel_from_entry(*entry)
        except _UNUSABLE as e:
            self.reject(key, unusable(e))
            return None
        self.stats["hit"] += 1
        return kernel

    def load_runtime(self, key: str) -> loader.LoadedModule | None:
        """The machine code of runtime module entry `key` (`runtime_code`'s), loaded, or
        None (a miss, a rejected entry)."""
        entry = self.read(key)
        if entry is None:
            return None
        header, sections = entry
        try:
            if header.get("kind") != "runtime":
                raise ValueError("not a runtime module's entry")
            module = _load_code(header, sections["object"], "")
        except _UNUSABLE as e:
            self.reject(key, unusable(e))
            return None
        self.stats["hit"] += 1
        return module

    def reject(self, key: str, why: str) -> None:
        """Count entry `key` rejected (the caller compiles the kernel again and files it
        anew), with a CacheWarning that says why."""
        self.stats["rejected"] += 1
        self.warn(f"the kernel cache's entry {key[:16]}... cannot be used ({why}): it is compiled again and replaced")

    # ----------------------------------------------------------------- write

    def write(self, key: str, header: dict, sections: dict[str, bytes]) -> bool:
        """File an entry under `key`, atomically (temporary file, fsync, rename); False
        when it was not written (the disk cache is off, Loom's sources changed since
        this process imported them, or the write failed: then with a warning)."""
        folder = self.folder()
        if folder is None or not self.fingerprint().sources.unchanged():
            return False
        import tempfile

        data = encode(key, header, sections)
        temporary = None
        try:
            fd, temporary = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=folder)  # mode 0600
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temporary, folder / (key + _SUFFIX))
        except OSError as e:
            if temporary is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
            self.warn(f"cannot write to the kernel cache in {folder} ({e.strerror or e})")
            return False
        self.stats["stored"] += 1
        self._bound(folder, len(data))
        return True

    def store(self, key: str, kernel: Kernel) -> bool:
        """Keep `kernel` under `key` (see `write`)."""
        entry = kernel_entry(kernel)
        return entry is not None and self.write(key, *entry)

    def _bound(self, folder: Path, added: int) -> None:
        """Keep the folder under the bound: past it, remove the entries used longest ago
        until it is under 90% of it. The folder is listed at this process's first store
        and whenever its stores may have crossed the bound since."""
        limit = max_bytes()
        with self._lock:
            known = self._known_bytes.get(folder)
            if known is not None and known + added <= limit:
                self._known_bytes[folder] = known + added
                return
        entries, total, now = [], 0, time.time()
        try:
            listing = list(os.scandir(folder))
        except OSError:
            return
        for item in listing:
            try:
                st = item.stat(follow_symlinks=False)
            except OSError:
                continue
            if item.name.endswith(_SUFFIX):
                entries.append((st.st_mtime_ns, st.st_size, item.path))
                total += st.st_size
            elif item.name.endswith(".tmp") and now - st.st_mtime > _STALE_TEMPORARY_S:
                with contextlib.suppress(OSError):
                    os.unlink(item.path)
        if total > limit:
            for _mtime, size, path in sorted(entries):
                if total <= limit * 0.9:
                    break
                with contextlib.suppress(OSError):
                    os.unlink(path)
                    self.stats["evicted"] += 1
                total -= size
        with self._lock:
            self._known_bytes[folder] = total

    def clear(self) -> int:
        """Remove every entry of the current folder; returns how many there were."""
        folder = self.folder()
        removed = 0
        if folder is not None:
            for item in os.scandir(folder):
                if item.name.endswith(_SUFFIX):
                    with contextlib.suppress(OSError):
                        os.unlink(item.path)
                        removed += 1
            self._known_bytes.pop(folder, None)
        return removed


def _unsafe(path: Path) -> str:
    """Why machine code must not be loaded from `path` ("" when it may): a folder
    another user owns or can write to."""
    st = os.stat(path)
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        return "belongs to another user"
    if st.st_mode & 0o022:
        return f"is writable by others (mode {st.st_mode & 0o777:o})"
    return ""


disk_cache = DiskCache()


def runtime_code(name: str, ir: str):
    """The machine code of runtime module `name` (LLVM IR `ir`: the buffer pool), one
    copy per call: read from the disk cache where it is there, else compiled at O3 and
    filed there. Call with compiler.jit.loader.LOCK held."""
    key = disk_cache.key("runtime", name, ir) if disk_cache.folder() is not None else None
    module = disk_cache.load_runtime(key) if key is not None else None
    if module is not None:
        return module
    from compiler.jit.engine import compile_ir  # LLVM: imported only where the entry is missing

    module = compile_ir(ir)
    if key is not None and _loadable(module.object_code):
        disk_cache.write(key, {"kind": "runtime", "cpu": module.cpu, "symbols": module.symbols},
                         {"object": module.object_code})
    return module

"""The process-wide settings Loom changes while it works on IR, and restores after.

While any thread parses, transforms, lowers or prints IR (a "session"), two settings of
the Python process are changed:

- Python's recursion limit is raised to `RECURSION_LIMIT`: xDSL parses, verifies,
  rewrites and prints recursively, about 7 frames per level of nested regions, so
  Python's default (1,000) stops at about 140 levels; 20,000 takes about 2,800. Measured
  on a nest of affine.for 10,000 deep: the parser still raises RecursionError cleanly at
  a limit of 50,000 frames and overflows the C stack (SIGSEGV) at 100,000, so 20,000
  leaves a margin. A limit set higher by the caller is kept.
- The cyclic garbage collector is paused. A pass over a big module makes and drops many
  objects, and each collection of the oldest generation walks every object alive, the
  module's included: over the pass pipeline and the LLVM emission of a chain of 1,000
  elementwise ops that is a fifth of the compile time (4.5 s of CPU with the collector,
  3.6 s without, measured in one process, alternating), and it grows faster than the
  module. The garbage the pause leaves (erased ops: cycles of parent pointers) goes at
  the next collection after it, as usual; the pause adds that garbage to the compile's
  peak memory (+30 MiB at 2,000 ops).

Both are process-wide, and compiles may nest (a pass that runs a pipeline) or run in
several threads at once: one lock and one count of the sessions open. The first session
to open saves both settings and changes them; the last to close restores them. A
session that restored its own saved values while another was still open would take the
recursion room from under it.

`IMPORTED_SOURCES` is Loom's source files as this process imported them: the path, size and
mtime of each .py file of its packages (compiler/, passes/, dialects/), taken when this
module is imported, with `LoomError` (passes/support/diagnostics.py), before any of Loom's
code that works on IR or kernels runs (1 to 2 ms for ~80 files). Python decides by the
same size and mtime whether a module's compiled copy is current, so a file whose stamp
changed since may not be the code the process runs: compiler/jit/disk_cache.py then
neither reads nor files a kernel on disk.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: Python's recursion limit while a session is open (see the module's docstring)
RECURSION_LIMIT = 20_000

#: the packages whose sources make Loom's machine code
PACKAGES = ("compiler", "passes", "dialects")

Stamp = tuple[tuple[str, int, int], ...]


def package_roots() -> list[str]:
    """The folders of Loom's packages, as this process imports them (found without
    importing them)."""
    roots = []
    for name in PACKAGES:
        module = sys.modules.get(name)
        locations = getattr(module, "__path__", None) if module else None
        if locations is None:
            spec = importlib.util.find_spec(name)
            locations = spec.submodule_search_locations if spec else None
        roots += list(locations or ())
    return roots


def source_files(roots: list[str]) -> list[tuple[str, str]]:
    """(name within its package's parent, path) of every .py file under `roots`, in a
    fixed order (names sorted, folder by folder; __pycache__ left out)."""
    found: list[tuple[str, str]] = []

    def walk(folder: str, where: str) -> None:
        with os.scandir(folder) as listing:
            items = sorted(listing, key=lambda item: item.name)
        for item in items:
            if item.name.endswith(".py") and item.is_file():
                found.append((f"{where}/{item.name}", item.path))
            elif item.name != "__pycache__" and item.is_dir():
                walk(item.path, f"{where}/{item.name}")

    for root in roots:
        walk(root, os.path.basename(root))
    return found


def stamp(files: list[tuple[str, str]]) -> Stamp:
    """(path, size, mtime) of each of `files` (a file gone: size -1): what an edit changes."""
    out = []
    for _name, path in files:
        try:
            st = os.stat(path)
            out.append((path, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((path, -1, 0))
    return tuple(out)


#: Loom's sources as this process imported them (see the module's docstring)
IMPORTED_SOURCES: Stamp = stamp(source_files(package_roots()))

_lock = threading.Lock()
_open = 0
_saved_gc = False
_saved_limit = 0


@contextmanager
def session() -> Iterator[None]:
    """The block runs with room for deep recursion and the cyclic garbage collector off
    (reference counting still frees what it can); both as they were when the last open
    session ends."""
    global _open, _saved_gc, _saved_limit
    with _lock:
        if _open == 0:
            _saved_gc, _saved_limit = gc.isenabled(), sys.getrecursionlimit()
            gc.disable()
            if _saved_limit < RECURSION_LIMIT:
                sys.setrecursionlimit(RECURSION_LIMIT)
        _open += 1
    try:
        yield
    finally:
        with _lock:
            _open -= 1
            if _open == 0:
                if _saved_gc:
                    gc.enable()
                if _saved_limit < RECURSION_LIMIT:
                    try:
                        sys.setrecursionlimit(_saved_limit)
                    except RecursionError:  # this thread is deeper than the old limit (it opened its
                        pass  # session inside another thread's): the room stays, rather than fail here

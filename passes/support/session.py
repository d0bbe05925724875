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

`IMPORTED_AT_NS` is when this process imported Loom: this module comes with `LoomError`
(passes/support/diagnostics.py), before any of Loom's code that works on IR or kernels
runs. A source file of Loom newer than that may not be the code the process runs, and
then compiler/jit/disk_cache.py files no kernel on disk.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

#: Python's recursion limit while a session is open (see the module's docstring)
RECURSION_LIMIT = 20_000

#: when this process imported Loom (see the module's docstring)
IMPORTED_AT_NS = time.time_ns()

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

"""Python's cyclic garbage collector paused while a compile builds and rewrites IR.

A pass over a big module makes and drops many objects, and each collection of the
oldest generation walks every object alive, the module's included: over the pass
pipeline and the LLVM emission of a chain of 1,000 elementwise ops that is a fifth of
the compile time (4.5 s of CPU with the collector, 3.6 s without, measured in one
process, alternating), and it grows faster than the module. The garbage the pause
leaves (erased ops: cycles of parent pointers) goes at the next collection after it, as
usual; the pause adds that garbage to the compile's peak memory (+30 MiB at 2,000 ops).

Nested and concurrent pauses nest: the collector is back on (if it was on) when the
last one ends.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def paused() -> Iterator[None]:
    """The block runs with the cyclic garbage collector off (reference counting still
    frees what it can)."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()

"""Diagnostics in the form `file:line:col: error: message`.

`LoomError` is what every Loom component raises for bad input; it is a `ValueError`, so the
Python API raises the same message the CLI prints. Locations come from the ops
(`op_location`: the parser records each op's source position, passes/support/parser.py) or from
the raw input (`text_location`). IR nested deeper than Python's recursion allows is a
LoomError too (`deep_nesting`), never a RecursionError.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from passes.support.session import RECURSION_LIMIT, session

if TYPE_CHECKING:  # LoomError comes without xDSL: the JIT runtime raises it too (a kernel from the disk cache)
    from xdsl.ir import Operation


class LoomError(ValueError):
    """A user-facing error. `str(e)` is `file:line:col: error: message` when the location
    is known, `error: message` otherwise (a command-line tool puts its name in front)."""

    def __init__(self, message: str, op: Operation | None = None, location: str | None = None):
        self.message = message
        if location is None and op is not None:
            location = op_location(op)
        self.location = location
        super().__init__(f"{location}: error: {message}" if location else f"error: {message}")


def op_location(op: Operation) -> str | None:
    """`file:line:col` of the op, or of its closest ancestor that has one."""
    from xdsl.dialects.builtin import FileLineColLoc  # loaded already: `op` is xDSL's

    cur: Operation | None = op
    while cur is not None:
        loc = cur.location
        if isinstance(loc, FileLineColLoc):
            return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}"
        cur = cur.parent_op()
    return None


def text_location(data: bytes, offset: int, filename: str) -> str:
    """`file:line:col` of a byte offset in the input (for bytes the parser never saw)."""
    line = data.count(b"\n", 0, offset) + 1
    col = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"{filename}:{line}:{col}"


# --------------------------------------------------------------------------------------
# Deeply nested IR
# --------------------------------------------------------------------------------------


def nesting_depth(root: Operation) -> tuple[int, Operation]:
    """The first deepest op under `root` and how many regions enclose it (iteratively:
    this runs when recursion has failed)."""
    deepest, best = root, 0
    stack: list[tuple[Operation, int]] = [(root, 0)]
    while stack:
        op, depth = stack.pop()
        if depth > best:
            deepest, best = op, depth
        for region in reversed(op.regions):
            for block in reversed(region.blocks):
                stack.extend((child, depth + 1) for child in reversed(block.ops))
    return best, deepest


@contextmanager
def deep_nesting(root: Operation | None = None, what: str = "verifying") -> Iterator[None]:
    """Run xDSL's recursive parser, verifier, passes or printer in a session
    (passes/support/session.py: room for deeply nested IR, the garbage collector paused), and
    turn what still recurses too deep into a LoomError at the deepest op of `root`.
    A RecursionError in IR that is not deeply nested is a bug and is raised as it is."""
    with session():
        try:
            yield
        except RecursionError:
            if root is None:
                raise
            depth, deepest = nesting_depth(root)
            if depth < RECURSION_LIMIT // 100:
                raise
            raise LoomError(too_deep(depth, what), deepest) from None


def too_deep(depth: int | None, what: str) -> str:
    levels = f"{depth} levels of nested regions" if depth is not None else "nested regions"
    return (f"the IR is nested too deeply for Loom: {levels} exhaust Python's recursion "
            f"limit ({RECURSION_LIMIT} frames) while {what}")


def short_message(msg: str) -> str:
    """xDSL verifier messages may carry a printout of the module; keep the message."""
    lines = [ln for ln in msg.strip().splitlines() if ln.strip()]
    for ln in lines:
        if "Operation does not verify:" in ln:
            return ln.split("Operation does not verify:", 1)[1].strip(" |-")
    return lines[-1].strip(" |-^") if lines else msg

"""Optimization remarks: what a pass did to which nest, and why it skipped one.

Passes call `remark(pass_name, op, message)`. Nothing is kept unless a caller collects:
`loom-opt --remarks` prints them on stderr, `compile(..., remarks=True)` keeps them on the
Kernel. The format follows the diagnostics: `file:line:col: remark: [pass] message`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from xdsl.ir import Operation

from passes.support.diagnostics import op_location


@dataclass(frozen=True)
class Remark:
    pass_name: str
    location: str | None
    message: str

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location else ""
        return f"{where}remark: [{self.pass_name}] {self.message}"


_sink: ContextVar[list[Remark] | None] = ContextVar("loom_remarks", default=None)


def remark(pass_name: str, op: Operation | None, message: str) -> None:
    sink = _sink.get()
    if sink is not None:
        sink.append(Remark(pass_name, op_location(op) if op is not None else None, message))


@contextmanager
def collect() -> Iterator[list[Remark]]:
    """Collect the remarks of everything run inside the block."""
    sink: list[Remark] = []
    token = _sink.set(sink)
    try:
        yield sink
    finally:
        _sink.reset(token)

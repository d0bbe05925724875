"""Optimization remarks: what a pass did to which nest, and why it skipped one.

Passes call `remark(pass_name, op, message, **payload)`, with `missed=True` where the pass
left something as it was and says why (LLVM's OptimizationRemarkMissed beside
OptimizationRemark). Nothing is kept unless a caller
collects: `loom-opt --remarks` prints them on stderr, `compile(..., remarks=True)` keeps them
on the Kernel. The text follows the diagnostics: `file:line:col: remark: [pass] message`.

A remark is data, as MLIR's `Diagnostic` carries its arguments and metadata beside its
text: `payload` holds the objects the message was written from (a matmul's plan, the nest's
name, the pass list), so that a reader (explain) takes them from there and never parses
the message; the text is rendered at the edge. Whether a remark reports a change or a refusal
is data too (`missed`), never read from its words.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from xdsl.ir import Operation

from passes.support.diagnostics import op_location


@dataclass(frozen=True)
class Remark:
    pass_name: str
    location: str | None
    message: str
    #: whether the pass left something as it was (the message says why) rather than changed it
    missed: bool = False
    #: the structured arguments of the message (read-only): what a reader of remarks uses
    payload: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), compare=False)

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location else ""
        return f"{where}remark: [{self.pass_name}] {self.message}"


_sink: ContextVar[list[Remark] | None] = ContextVar("loom_remarks", default=None)
_scope: ContextVar[Mapping[str, Any]] = ContextVar("loom_remark_scope", default=MappingProxyType({}))


def remark(pass_name: str, op: Operation | None, message: str, *, missed: bool = False, **payload: Any) -> None:
    """Report `message` about `op` (None: about the whole module), with the objects it was
    written from as `payload`, to whoever collects; `missed`: the message says why the pass
    left it as it was."""
    sink = _sink.get()
    if sink is not None:
        sink.append(Remark(pass_name, op_location(op) if op is not None else None, message, missed,
                           MappingProxyType({**_scope.get(), **payload})))


@contextmanager
def scope(**payload: Any) -> Iterator[None]:
    """Every remark made inside the block carries `payload` too, beside its own: a pass that
    runs other passes on objects it named says there what the names stand for (loom-default
    tags a nest with a temporary name while passes run on it alone)."""
    token = _scope.set(MappingProxyType({**_scope.get(), **payload}))
    try:
        yield
    finally:
        _scope.reset(token)


@contextmanager
def collect() -> Iterator[list[Remark]]:
    """Collect the remarks of everything run inside the block."""
    sink: list[Remark] = []
    token = _sink.set(sink)
    try:
        yield sink
    finally:
        _sink.reset(token)

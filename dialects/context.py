"""The xDSL context Loom parses and transforms in: every upstream dialect plus loom,
arith_ext (arith's casts on vectors) and x86vector (the dot-product instructions)."""

import functools
from collections.abc import Callable

from xdsl.context import Context
from xdsl.ir import Dialect
from xdsl.universe import Universe

from dialects.arith_ext import ArithExt
from dialects.llvm_ext import EXTRA_LLVM_OPS
from dialects.loom import Loom
from dialects.x86vector import X86Vector


@functools.cache
def _dialect_factories() -> tuple[tuple[str, Callable[[], Dialect]], ...]:
    """xDSL's dialects, looked up once per process: xDSL finds them through the installed
    packages' entry points, which reads every package's metadata (~10 ms a time, twice
    per compile)."""
    return tuple(Universe.get_multiverse().all_dialects.items())


def make_context() -> Context:
    ctx = Context()
    for name, factory in _dialect_factories():
        ctx.register_dialect(name, factory)
    ctx.load_dialect(Loom)
    ctx.load_dialect(ArithExt)
    ctx.load_dialect(X86Vector)
    for op in EXTRA_LLVM_OPS:
        ctx.load_op(op)
    return ctx

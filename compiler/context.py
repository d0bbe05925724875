"""The xDSL context Loom parses and transforms in: every upstream dialect plus loom."""

from xdsl.context import Context
from xdsl.universe import Universe

from dialects.llvm_ext import EXTRA_LLVM_OPS
from dialects.loom import Loom


def make_context() -> Context:
    ctx = Context()
    for name, factory in Universe.get_multiverse().all_dialects.items():
        ctx.register_dialect(name, factory)
    ctx.load_dialect(Loom)
    for op in EXTRA_LLVM_OPS:
        ctx.load_op(op)
    return ctx

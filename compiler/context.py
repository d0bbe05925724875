"""The xDSL context Loom parses and transforms in: every upstream dialect plus loom."""

from xdsl.context import Context
from xdsl.universe import Universe

from dialects.loom import Loom


def make_context() -> Context:
    ctx = Context()
    for name, factory in Universe.get_multiverse().all_dialects.items():
        ctx.register_dialect(name, factory)
    ctx.load_dialect(Loom)
    from passes.loom_convert_to_llvm import EXTRA_LLVM_OPS  # llvm ops xDSL 0.74 lacks

    for op in EXTRA_LLVM_OPS:
        ctx.load_op(op)
    return ctx

"""loom-naive: the `naive` named pipeline as one pass (loom dialect -> llvm dialect,
no scheduling), so `loom-opt -p loom-naive` runs it."""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from passes.support.verifier import verify


@dataclass(frozen=True)
class LoomNaivePipelinePass(ModulePass):
    name = "loom-naive"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from passes.pipelines import build

        build("naive", lambda _prev, module, _next: verify(module)).apply(ctx, op)

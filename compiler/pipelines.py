"""Named pipelines: a schedule is a pass pipeline, and these are the ones with names.

`naive` lowers the loom dialect to the llvm dialect with no scheduling: the textbook loop
nests of `convert-loom-to-affine`, as written.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline

from compiler.diagnostics import LoomError

#: loom on tensors -> loom on memrefs -> affine loops (the schedule passes go here)
TO_AFFINE = ["loom-bufferize", "convert-loom-to-affine"]
#: affine loops -> llvm dialect
TO_LLVM = ["loom-lower-affine", "convert-scf-to-cf", "loom-convert-to-llvm"]

PIPELINES: dict[str, list[str]] = {
    "naive": [*TO_AFFINE, *TO_LLVM],
}


def resolve(pipeline: str) -> str:
    """A pipeline name (`naive`, or its pass flag `loom-naive`) or a pass-list string ->
    the pass-list string to run."""
    name = pipeline.strip()
    name = name.removeprefix("loom-") if name.removeprefix("loom-") in PIPELINES else name
    if name in PIPELINES:
        return ",".join(PIPELINES[name])
    return pipeline


Callback = Callable[[ModulePass | None, ModuleOp, ModulePass | None], None]


def build(spec: str, callback: Callback | None = None) -> PassPipeline:
    """Parse a pass-list string against all passes (Loom's and xDSL's)."""
    from passes import get_all_passes

    try:
        return PassPipeline.parse_spec(get_all_passes(), resolve(spec), callback)
    except LoomError:
        raise
    except Exception as e:
        raise LoomError(f"invalid pass pipeline '{spec}': {e}") from None

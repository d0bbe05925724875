"""Named pipelines: a schedule is a pass pipeline, and these are the ones with names.

`naive` lowers the loom dialect to the llvm dialect with no scheduling: the textbook loop
nests of `convert-loom-to-affine`, as written. `default` schedules them for the host with
`loom-default` (cost model: passes/cost_model.py) in between.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.arg_spec import parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError

from compiler.diagnostics import LoomError

#: loom on tensors -> loom on memrefs -> affine loops (the schedule passes go here)
TO_AFFINE = ["loom-bufferize", "convert-loom-to-affine"]
#: affine loops -> llvm dialect
TO_LLVM = ["loom-lower-affine", "convert-scf-to-cf", "loom-convert-to-llvm"]

PIPELINES: dict[str, list[str]] = {
    "naive": [*TO_AFFINE, *TO_LLVM],
    "default": [*TO_AFFINE, "loom-default", *TO_LLVM],
}
#: passes that run a whole named pipeline (loom dialect -> llvm dialect) by themselves
WHOLE_PIPELINE_PASSES = {"loom-naive": "naive"}


def resolve(pipeline: str) -> str:
    """A pipeline name (`naive`, `default`, or `loom-naive`, the pass that runs `naive`) ->
    its pass list; a pass-list string is taken as it is (what `loom-opt -p` runs: there
    `loom-default` is the schedule pass alone, and shows the scheduled loops)."""
    name = pipeline.strip()
    name = WHOLE_PIPELINE_PASSES.get(name, name)
    if name in PIPELINES:
        return ",".join(PIPELINES[name])
    return pipeline


def complete(pipeline: str) -> str:
    """The pipeline `compile()` and `loom-run` run for a schedule: a named pipeline as it
    is; a pass list gets the steps it leaves out, bufferization and the lowering to affine
    in front, the lowering to LLVM behind. So `loom-tile{sizes=32,32,32}` just works."""
    spec = resolve(pipeline)
    if spec != pipeline or not spec.strip():
        return spec
    try:
        names = {p.name for p in parse_pipeline(spec)}
    except (Exception, ArgSpecParseError) as e:  # xDSL's parse error is a BaseException
        raise LoomError(f"invalid pass pipeline '{pipeline}': {e}") from None
    if names & set(WHOLE_PIPELINE_PASSES):
        return spec
    before = [p for p in TO_AFFINE if p not in names]
    after = [p for p in TO_LLVM if p not in names]
    return ",".join([*before, spec, *after])


Callback = Callable[[ModulePass | None, ModuleOp, ModulePass | None], None]


def build(spec: str, callback: Callback | None = None, *, literal: bool = True) -> PassPipeline:
    """Parse a pass-list string against all passes (Loom's and xDSL's); `literal=False`
    completes it first (see `complete`)."""
    from passes import get_all_passes

    try:
        return PassPipeline.parse_spec(get_all_passes(), resolve(spec) if literal else complete(spec), callback)
    except LoomError:
        raise
    except (Exception, ArgSpecParseError) as e:  # xDSL's parse error is a BaseException
        raise LoomError(f"invalid pass pipeline '{spec}': {e}") from None

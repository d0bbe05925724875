"""Named pipelines: a schedule is a pass pipeline, and these are the ones with names.

`naive` lowers the loom dialect to the llvm dialect with no scheduling: the textbook loop
nests of `convert-loom-to-affine`, as written. `default` schedules them for the host with
`loom-default` (cost model: passes/analysis/cost_model.py) in between.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.arg_spec import ArgSpec, parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError

from passes.support.algorithms import ALGORITHMS, check_algorithms
from passes.support.diagnostics import LoomError, deep_nesting

#: loom on tensors -> loom on memrefs -> affine loops (the schedule passes go here); a
#: function of many nests gets a function per distinct nest (compile time stays linear)
TO_AFFINE = ["loom-bufferize", "convert-loom-to-affine", "loom-outline"]
#: affine loops -> llvm dialect (parallel loops on libgomp's threads); xDSL's cse merges
#: the index arithmetic each lowered access expanded on its own (the accesses of an
#: unrolled body share most of theirs), so that the passes after it have fewer ops to
#: walk: compile time 0.71 -> 0.57 s for a 1024^3 matmul, 1.52 -> 1.22 s for the batch-8
#: stem, 0.39 -> 0.25 s for an NHWC 3x3 C64 layer (LLVM would merge them anyway)
TO_LLVM = ["loom-lower-affine", "cse", "loom-lower-parallel", "convert-scf-to-cf", "loom-convert-to-llvm"]

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
    in front, the lowering to LLVM behind. So `loom-tile{sizes=32,32,32}` just works.
    An empty pipeline is an error here (there is nothing to complete: name `naive`)."""
    return ",".join(str(p) for p in completed(pipeline))


#: passes on the loom ops on tensors: a pass list that names them gets bufferization after them
TENSOR_PASSES = ("loom-winograd",)


def with_algorithms(pipeline: str, algorithms: str) -> str:
    """`pipeline` with the passes of `algorithms` (passes/support/algorithms.py) in front,
    where it does not name them itself (a named pipeline is expanded to its pass list)."""
    added = [p for p in ALGORITHMS[check_algorithms(algorithms)] if p not in {s.name for s in parse(pipeline)}]
    return ",".join([*added, resolve(pipeline)]) if added else pipeline


#: the passes that take the thread count of compile(num_threads=N)
THREADED_PASSES = ("loom-default", "loom-parallelize")


def with_threads(specs: list[ArgSpec], num_threads: int | None) -> list[ArgSpec]:
    """`specs` with `num-threads=N` given to the passes that run loops on threads, where
    the pipeline does not set it itself (compile(num_threads=N))."""
    if num_threads is None:
        return specs
    return [ArgSpec(p.name, {**p.parameters, "num-threads": (num_threads,)})
            if p.name in THREADED_PASSES and "num-threads" not in p.parameters else p for p in specs]


def with_profile(specs: list[ArgSpec]) -> list[ArgSpec]:
    """`specs` with loom-profile before the lowering to LLVM (on the scheduled nests),
    where the pipeline does not run it itself (compile(profile=True))."""
    if any(p.name == "loom-profile" for p in specs):
        return specs
    at = next((i for i, p in enumerate(specs) if p.name == TO_LLVM[0]), len(specs))
    return [*specs[:at], ArgSpec("loom-profile", {}), *specs[at:]]


def completed(pipeline: str) -> list[ArgSpec]:
    """The passes of `complete(pipeline)`, the pipeline parsed once."""
    if not pipeline.strip():
        raise LoomError(f"empty pass pipeline: name a pipeline ({', '.join(PIPELINES)}) or list "
                        f"passes, e.g. 'loom-tile{{sizes=32,32,32}}'")
    specs = parse(pipeline)
    names = {p.name for p in specs}
    if resolve(pipeline) != pipeline or names & set(WHOLE_PIPELINE_PASSES):
        return specs
    lead = 0
    while lead < len(specs) and specs[lead].name in TENSOR_PASSES:
        lead += 1
    before = [ArgSpec(p, {}) for p in TO_AFFINE if p not in names]
    after = [ArgSpec(p, {}) for p in TO_LLVM if p not in names]
    return [*specs[:lead], *before, *specs[lead:], *after]


def parse(pipeline: str) -> list[ArgSpec]:
    """The passes of a pass-list string, each a known pass; a LoomError (one line) names
    what is wrong: the syntax, or an unknown name with the close ones and the known ones."""
    from passes import get_all_passes

    spec = resolve(pipeline).strip()
    try:
        specs = list(parse_pipeline(spec))
    except ArgSpecParseError as e:  # a BaseException in xDSL 0.74, several lines long
        raise LoomError(f"invalid pass pipeline '{pipeline}': {syntax_message(e)}") from None
    available = get_all_passes()
    for p in specs:
        if p.name not in available:
            raise LoomError(f"invalid pass pipeline '{pipeline}': {unknown_name(p.name, available)}")
    return specs


def pass_list_text(passes: Iterable[ModulePass], *, shown: Collection[str] = ()) -> str:
    """Passes as a pass list writes them, which `build` reads back into the same passes:
    `loom-tile{sizes=64,256,128 op=matmul depth=0},loom-hoist{op=matmul}`. Each pass has the
    options it holds, in the order it declares them, less those left at their default
    (options named in `shown` are written even then); strings bare, where xDSL's
    `str(pass)` quotes them."""

    def value(v: object) -> str:
        return str(v).lower() if isinstance(v, bool) else str(v)

    texts = []
    for p in passes:
        given = p.pipeline_pass_spec().parameters
        options = [f"{name.replace('_', '-')}={','.join(map(value, values))}"
                   for name, values in p.pipeline_pass_spec(include_default=True).parameters.items()
                   if values and (name in given or name in shown)]
        texts.append(p.name + (f"{{{' '.join(options)}}}" if options else ""))
    return ",".join(texts)


def syntax_message(e: ArgSpecParseError) -> str:
    """xDSL's message is a header, `pass-pipeline:1:COL`, the text, a caret and the reason."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    col = next((m.group(1) for ln in lines if (m := re.fullmatch(r"pass-pipeline:\d+:(\d+)", ln))), None)
    reason = lines[-1] if lines else "malformed"
    return f"{reason[:1].lower()}{reason[1:]} (at character {col})" if col else reason


def unknown_name(name: str, available: dict[str, object]) -> str:
    """'unknown pass X', a guess at what was meant, and what there is (the named pipelines
    and Loom's passes; xDSL's are many, and listed by `loom-opt --help`)."""
    from passes import LOOM_PASSES

    if name in PIPELINES:
        return (f"'{name}' is a named pipeline, not a pass: give it alone (or use "
                f"loom-naive, the pass that runs the naive pipeline)")
    guesses = difflib.get_close_matches(name, [*PIPELINES, *available], n=3)
    hint = f"; did you mean {' or '.join(repr(g) for g in guesses)}?" if guesses else ""
    return (f"unknown pass or pipeline '{name}'{hint} (named pipelines: {', '.join(PIPELINES)}; "
            f"Loom's passes: {', '.join(LOOM_PASSES)}; xDSL's passes: see loom-opt --help)")


def pass_summaries() -> list[tuple[str, str]]:
    """(flag with its options, what it does) for each of Loom's passes, from the first
    sentence of its module's docstring (`loom-tile{sizes=... op=... depth=0}: tile ...`):
    what `loom-opt --help` lists."""
    import importlib

    from passes import LOOM_PASSES

    rows = []
    for flag, target in LOOM_PASSES.items():
        doc = importlib.import_module(f"passes.{target.split(':')[0]}").__doc__ or ""
        first = " ".join(doc.strip().split("\n\n")[0].split())
        usage, _, summary = first.partition(": ")
        if not usage.startswith(flag) or not summary:
            usage, summary = flag, first
        rows.append((usage, _gist(summary)))
    return rows


def _gist(text: str) -> str:
    """The first sentence (a period outside parentheses ends it), less a parenthesis that
    closes it: `copy the tile ... (the packing of BLIS; ...).` -> `copy the tile ...`."""
    depth = 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if ch == "." and depth == 0 and (i + 1 == len(text) or text[i + 1] == " "):
            text = text[:i]
            break
    return re.sub(r"\s*\([^()]*\)$", "", text)


Callback = Callable[[ModulePass | None, ModuleOp, ModulePass | None], None]


@dataclass(frozen=True)
class LoomPipeline(PassPipeline):
    """A pass pipeline whose passes may recurse as deep as the IR is nested (xDSL's
    rewriters and walkers recurse per region); too deep is a LoomError at the deepest op.
    The cyclic garbage collector waits until the pipeline is done (passes/support/session.py)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        with deep_nesting(op, "running the pass pipeline"):
            super().apply(ctx, op)


def build(spec: str, callback: Callback | None = None, *, literal: bool = True,
          num_threads: int | None = None, profile: bool = False) -> PassPipeline:
    """Parse a pass-list string against all passes (Loom's and xDSL's); `literal=False`
    completes it first (see `complete`); `num_threads` goes to the passes that take it
    (`with_threads`); `profile`: loom-profile runs after the schedule (`with_profile`)."""
    from passes import get_all_passes

    if literal:
        specs = parse(spec) if resolve(spec).strip() else []
    else:
        specs = completed(spec)
    specs = with_threads(specs, num_threads)
    if profile:
        specs = with_profile(specs)
    available = get_all_passes()
    try:
        passes = tuple(available[p.name]().from_pass_spec(p) for p in specs)
    except LoomError:
        raise
    except (Exception, ArgSpecParseError) as e:  # a bad option: xDSL's message is one line
        raise LoomError(f"invalid pass pipeline '{spec}': {e}") from None
    return LoomPipeline(passes, callback)

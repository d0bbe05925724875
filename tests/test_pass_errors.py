"""Errors of the schedule passes, at the IR level (no LLVM): nothing a pass is given ends
in a raw Python exception, and nothing is silently ignored.

- A pass that would do nothing says so as an error: `op=TAG` that no nest has (the tags
  there are listed), a module whose loom ops the lowering has not turned into loop nests
  yet (the passes to put first are named). Checked in one place, `select_nests`.
- Odd options (0, negative, huge, longer than the band, empty) on every schedule pass,
  after every other: a LoomError that names the pass, or a module that verifies.
- Every problem with loom-pack's options in one message.
- An unroll whose result would be too large is refused before anything is copied.
"""

import itertools
import re
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import compiler
from dialects.context import make_context
from passes.support.parser import parse_module
from passes.pipelines import build
from passes.support.remarks import collect
from kernels import matmul
from targets import TARGETS, planning_for

EXAMPLES = Path(__file__).parent.parent / "examples"
TO_AFFINE = "loom-bufferize,convert-loom-to-affine"


def run(src: str, spec: str, name: str = "t.mlir"):
    """Parse `src` and run the pass list `spec` on it (literally: nothing added)."""
    ctx = make_context()
    module = parse_module(ctx, src, name)
    build(spec).apply(ctx, module)
    module.verify()
    return module


# --------------------------------------------------------------------------------------
# No silent no-ops


MM = matmul((8, 6), (6, 5), (8, 5), np.float32)


def test_unknown_tag_lists_the_tags_there_are():
    with pytest.raises(compiler.LoomError) as e:
        compiler.compile(MM, pipeline="loom-tile{sizes=4 op=matmull}")
    assert str(e.value) == (
        "<source>:2:3: error: loom-tile: option 'op' is 'matmull', but no loop nest is tagged so "
        "(did you mean 'matmul'?); the tags present: 'matmul.init', 'matmul'"
    )


SCHEDULE_PASSES = [
    "loom-tile{sizes=2}", "loom-interchange{order=1,0}", "loom-unroll{factor=2}", "loom-unroll-jam{factors=2}",
    "loom-hoist", "loom-pack{operand=0 level=1}", "loom-peel{sizes=2}", "loom-prefetch", "loom-vectorize",
]


def _with_op(step: str, tag: str) -> str:
    return f"{step[:-1]} op={tag}}}" if step.endswith("}") else f"{step}{{op={tag}}}"


@pytest.mark.parametrize("step", SCHEDULE_PASSES)
def test_every_schedule_pass_refuses_an_unknown_tag(step):
    name = step.split("{")[0]
    with pytest.raises(compiler.LoomError, match=rf"{name}: option 'op' is 'conv', but no loop nest is tagged so"):
        run(MM, f"{TO_AFFINE},{_with_op(step, 'conv')}")


@pytest.mark.parametrize("step", SCHEDULE_PASSES)
@pytest.mark.parametrize("lowered, first", [("", TO_AFFINE), ("loom-bufferize,", "convert-loom-to-affine")])
def test_every_schedule_pass_refuses_loom_ops(step, lowered, first):
    """On tensors, or bufferized but not lowered: there is no loop nest yet; the error is
    at the loom op and names the passes to put first."""
    name = step.split("{")[0]
    with pytest.raises(compiler.LoomError) as e:
        run(MM, f"{lowered}{step}")
    on = "tensors" if not lowered else "memrefs"
    assert str(e.value) == (
        f"t.mlir:2:3: error: {name}: the module still holds loom ops ('loom.matmul' on {on}): the lowering to "
        f"the affine loop nests that schedule passes work on has not run; put {first} before {name}"
    )


def test_module_without_nests_is_no_error():
    """A function with no loop has nothing to schedule: every pass runs (a remark says
    so); a tag named with op= is still an error."""
    src = "func.func @nothing(%a: memref<4xf32>) {\n  func.return\n}"
    for step in SCHEDULE_PASSES:
        with collect() as remarks:
            run(src, step)
        assert [(r.message, r.missed) for r in remarks] == [("the module has no loop nest: nothing to schedule", True)]
    with pytest.raises(compiler.LoomError, match="option 'op' is 'matmul', but no loop nest is tagged so; "
                                                 "the module has no loop nest"):
        run(src, "loom-hoist{op=matmul}")


#: how the passes word a refusal; the flag, not these words, is what explain reads
REFUSAL_WORDS = re.compile(r"not (vectorized|parallel|hoisted|promoted|fused)|skipped:|left (as it is|serial|scalar)|"
                           r"kept:|stays serial|factor 1: nothing")
MM1 = matmul((1, 7), (7, 1), (1, 1), np.float32)


def test_a_remark_is_missed_exactly_when_its_pass_left_the_nest():
    """Every remark's `missed` flag agrees with its words, over each schedule pass alone,
    passes that refuse (a factor of 1, an identity order, one thread, a second prefetch)
    and loom-default, on an 8x5x6 and a 1x1x7 matmul: a pass that words a refusal also flags
    it, and none flags a change. Planned for AVX2 whatever the host (its 6-row register
    tile peels 2 of the 8 rows; AVX-512's 8 rows would leave nothing to peel)."""
    specs = [f"{TO_AFFINE},{step}" for step in SCHEDULE_PASSES] + [
        f"{TO_AFFINE},{steps}" for steps in (
            "loom-unroll{factor=1}", "loom-interchange{order=0,1,2}", "loom-parallelize{num-threads=2}",
            "loom-tile{sizes=4,4},loom-parallelize{num-threads=2 depth=1}", "loom-prefetch,loom-prefetch",
            "loom-fuse-epilogue", "loom-outline")
    ] + ["loom-default{num-threads=1}", "loom-default{num-threads=2}", "loom-default{skip=fuse}"]
    seen = set()
    for src, spec in itertools.product((MM, MM1), specs):
        with collect() as remarks, planning_for(TARGETS["avx2"]):
            run(src, spec)
        for r in remarks:
            assert r.missed == bool(REFUSAL_WORDS.search(r.message)), (spec, str(r))
            seen.add((r.pass_name, r.missed))
    assert {(name, True) for name in ("loom-vectorize", "loom-parallelize", "loom-unroll", "loom-peel")} <= seen
    assert {(name, False) for name in ("loom-vectorize", "loom-parallelize", "loom-unroll", "loom-peel")} <= seen


def test_default_lowers_itself_and_runs_with_its_own_tags():
    """loom-default runs the schedule passes with temporary tags of its own: none of the
    checks above stands in its way, and the nests get their tags back (C's zero fill is
    gone: the step `fuse` drops it; with skip=fuse it stays, tagged)."""
    for pipeline, expected in (("loom-default", {"matmul"}), ("loom-default{skip=fuse}", {"matmul.init", "matmul"})):
        module = run(MM, pipeline)
        tags = [op.attributes["loom.tag"].data for op in module.walk() if "loom.tag" in op.attributes]
        assert set(tags) == expected, pipeline


# --------------------------------------------------------------------------------------
# Odd options: a LoomError naming the pass, or IR that verifies


ODD = {
    "loom-tile": ["sizes=0", "sizes=-1", "sizes=1000000000", "sizes=2 depth=100", "sizes=2 depth=-3",
                  "sizes=3,3,3,3,3,3,3,3,3", "sizes=5 depth=2", "sizes=0 depth=-1"],
    "loom-interchange": ["order=0", "order=0,0", "order=-1,0", "order=5,4,3,2,1,0", "order=100", "order=1,0,3,2,6,5,4"],
    "loom-unroll": ["factor=0", "factor=-1", "factor=1", "factor=1000000000"],
    "loom-unroll-jam": ["factors=0", "factors=-2", "factors=1000000000", "factors=2,2,2,2,2,2,2,2,2",
                        "factors=1,1,1,1,1,1,5", "factors=1000000000,1000000000,1000000000"],
    "loom-pack": ["operand=7", "level=0", "operand=-1 level=-1", "operand=0 level=100", "operand=2 level=1",
                  "operand=0 level=0 panel=0", "operand=1 level=1 panel=1000000000",
                  "operand=1000000000 level=1000000000"],
    "loom-peel": ["sizes=0", "sizes=-5", "sizes=1000000000", "sizes=7,7,7,7,7,7,7,7,7", "sizes=1,1,1,1,1,1,2"],
    "loom-prefetch": ["distance=0", "distance=-1", "distance=1000000000", "locality=4", "locality=-1"],
    "loom-hoist": ["op=zz"],
}
#: what the odd options run after (the in-process sweep of issue 9 ran them after every
#: schedule pass, on every example; these are the orders that had found bugs)
BEFORE = ["", "loom-hoist", "loom-tile{sizes=4,4,4}", "loom-unroll-jam{factors=2,2}", "loom-pack{operand=1 level=1}"]
CASES = [(before, f"{name}{{{option}}}") for before in BEFORE for name, options in ODD.items() for option in options]


@pytest.mark.parametrize("example", ["matmul_bias_relu.mlir", "conv2d.mlir"])
def test_odd_options_after_each_pass(example):
    """Every odd option of every pass, after each of a few passes (one test per example:
    the cases share the parse and the lowering)."""
    ctx = make_context()
    lowered = parse_module(ctx, (EXAMPLES / example).read_text(), example)
    build(TO_AFFINE).apply(ctx, lowered)
    escaped = []
    for before, step in CASES:
        spec = ",".join(s for s in (before, step) if s)
        module = lowered.clone()
        try:
            build(spec).apply(ctx, module)
            module.verify()
        except compiler.LoomError as e:
            if not any(f"error: {p}: " in str(e) for p in (before.split("{")[0], step.split("{")[0]) if p):
                escaped.append(f"{spec}: a LoomError that names no pass: {e}")
        except Exception as e:  # a raw exception from a pass is the bug this test is for
            escaped.append(f"{spec}: {type(e).__name__}: {e}")
    assert not escaped, "\n".join(escaped[:10])


# --------------------------------------------------------------------------------------
# loom-pack: every problem with the options at once


@pytest.mark.parametrize(
    "options, message",
    [
        ("operand=7",
         "loom-pack: option 'level' is required (an integer >= 0); option 'operand' is 7, but nest 'matmul.init' "
         "reads no memref, nest 'matmul' reads 3 memrefs (operands 0..2)"),
        ("operand=-1 level=-2 panel=0",
         "error: loom-pack: option 'operand' must be >= 0, got -1; option 'level' must be >= 0, got -2; "
         "option 'panel' must be a positive integer, got 0"),
        ("operand=1 level=5",
         "loom-pack: option 'level' is 5, but the read of %b in nest 'matmul' is inside 3 loops (levels 0..2)"),
        ("level=1 op=mm",
         "loom-pack: option 'operand' is required (an integer >= 0); option 'op' is 'mm', but no loop nest is "
         "tagged so"),
    ],
)
def test_pack_reports_every_problem_at_once(options, message):
    with pytest.raises(compiler.LoomError) as e:
        run(MM, f"{TO_AFFINE},loom-pack{{{options}}}")
    assert message in str(e.value)


def test_pack_panel_wider_than_the_tile_is_lowered():
    """A panel wider than the tile would only pad the buffer: one panel as wide as the tile."""
    module = run(MM, f"{TO_AFFINE},loom-tile{{sizes=4,4,4 op=matmul}},loom-pack{{operand=1 level=2 panel=1000000000}}")
    assert "memref<1x4x4xf32>" in str(module)


# --------------------------------------------------------------------------------------
# Size limits


MM256 = matmul((256, 256), (256, 256), (256, 256), np.float32)


@pytest.mark.parametrize(
    "step, message",
    [
        ("loom-unroll-jam{factors=256,256 op=matmul}",
         "loom-unroll-jam: unroll-jam of band (i, j, k) by [256, 256] would make nest 'matmul' about 458,757 ops, "
         "more than the limit of 20,000 ops per unrolled nest"),
        # the 167 s, 776 MB compile (83 s of it in LLVM: see loop_utils.MAX_UNROLLED_OPS)
        ("loom-unroll-jam{factors=64,64 op=matmul}",
         "loom-unroll-jam: unroll-jam of band (i, j, k) by [64, 64] would make nest 'matmul' about 28,677 ops, "
         "more than the limit of 20,000 ops per unrolled nest"),
        # the point loops `%i = %i_t to min(%i_t + 10, 256)` run at most 10 times: the
        # factors are lowered to 10, nothing is refused
        ("loom-tile{sizes=10,10,10},loom-unroll-jam{factors=1,1,1,1000000,1000000}", None),
        ("loom-tile{sizes=10,10,10},loom-unroll{factor=1000000}", None),
    ],
)
def test_unroll_size_limit_before_anything_is_copied(step, message):
    """The unroll-jam that ran for 10 minutes and grew past 3.6 GB is refused with the
    limit and the estimate, and within a few MiB: nothing was copied."""
    ctx = make_context()
    module = parse_module(ctx, MM256, "mm.mlir")
    build(TO_AFFINE).apply(ctx, module)
    tracemalloc.start()
    try:
        if message is None:
            build(step).apply(ctx, module)
        else:
            with pytest.raises(compiler.LoomError, match=re.escape(message)):
                build(step).apply(ctx, module)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert message is None or peak < 16 << 20, f"{peak / 2**20:.1f} MiB allocated before the refusal"


def test_peel_counts_its_copies_against_the_size_limit():
    """loom-peel copies the whole nest once per loop it splits: one split of a nest of
    about 8,000 ops (an 80-op body unrolled by 100) makes two of it, within the limit; two
    splits, three: refused, before the dependence analysis runs. (Few accesses in the
    body: the analysis of a matmul unrolled that far takes a minute.)"""
    adds = "\n".join(f"      %x{i + 1} = arith.addf %x{i}, %x{i} : f32" for i in range(80))
    src = f"""func.func @chain(%a: memref<10x400xf32>) {{
  affine.for %i = 0 to 10 {{
    affine.for %j = 0 to 400 {{
      %x0 = affine.load %a[%i, %j] : memref<10x400xf32>
{adds}
      affine.store %x80, %a[%i, %j] : memref<10x400xf32>
    }}
  }} {{loom.tag = "chain"}}
  func.return
}}"""
    unrolled = "loom-unroll{factor=100 op=chain}"
    run(src, f"{unrolled},loom-peel{{sizes=3 op=chain}}")
    with pytest.raises(compiler.LoomError, match=re.escape("loom-peel: peeling for sizes [3, 3] (2 copies of the nest) "
                                                           "would make nest 'chain' about ")):
        run(src, f"{unrolled},loom-peel{{sizes=3,3 op=chain}}")


def test_unroll_of_an_unknown_trip_count_is_bounded():
    src = """func.func @f(%a: memref<?xf32>, %n: index) {
  affine.for %i = 0 to %n {
    %v = affine.load %a[%i] : memref<?xf32>
    affine.store %v, %a[%i] : memref<?xf32>
  } {loom.tag = "copy"}
  func.return
}"""
    with pytest.raises(compiler.LoomError, match="about 3,000,000,004 ops, more than the limit of 20,000"):
        run(src, "loom-unroll{factor=1000000000}")
    with pytest.raises(compiler.LoomError, match="loom-unroll-jam: unroll-jam of band"):
        run(src, "loom-unroll-jam{factors=1000000}")


def test_pairs_of_passes_with_factors_at_the_limit():
    """Pairs of the unrolling passes whose second one would pass the limit: refused or
    run, never a raw exception."""
    mm64 = matmul((64, 64), (64, 64), (64, 64), np.float32)
    steps = ["loom-unroll{factor=64}", "loom-unroll-jam{factors=32,32}", "loom-hoist", "loom-tile{sizes=16,16,16}"]
    too_large = []
    for first, second in itertools.permutations(steps, 2):
        try:
            run(mm64, f"{TO_AFFINE},{first},{second}")
        except compiler.LoomError as e:
            if "more than the limit of 20,000 ops" in str(e):
                too_large.append((first, second))
            else:  # k hoisted or unrolled away: the band is (i, j), three sizes fit no nest
                assert first in ("loom-unroll{factor=64}", "loom-hoist") and second == steps[3], str(e)
                assert "loom-tile: the options fit no loop nest" in str(e)
    # k unrolled away, then 32 x 32 copies of 64 copies; or the other way round
    assert set(too_large) == {("loom-unroll{factor=64}", "loom-unroll-jam{factors=32,32}"),
                              ("loom-unroll-jam{factors=32,32}", "loom-unroll{factor=64}")}

"""compiler.explain and `loom-run --explain`: the loop nests stage by stage, the schedule's
decisions and their reasons, the estimated traffic, the GFLOP/s against the peak. No
timing is asserted: only that a time was measured and set against a peak."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import compiler
from compiler.build import load_module
from compiler.measure import peak
from compiler.explain.decisions import schedule_decisions
from compiler.explain.loop_nest import loop_nest
from compiler.explain.report import Report, explain_source
from passes.analysis.cost_model import plan_matmul
from passes.schedule.loom_default import NestName
from passes.schedule.loom_hoist import LoomHoistPass
from passes.support.remarks import Remark
from passes.support.target import host

ROOT = Path(__file__).parent.parent
EXAMPLES = ROOT / "examples"
BIN = Path(sys.executable).parent
#: an AVX2 host with fixed caches, one thread: plans (and so their words) known in advance
AVX2 = "cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1,threads=1"


@pytest.fixture(scope="module", autouse=True)
def private_cache(tmp_path_factory):
    """The peak measured into a cache directory of the tests' own, not the user's."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LOOM_CACHE_DIR", str(tmp_path_factory.mktemp("loom-cache")))
        yield


def example(name: str) -> tuple[str, str]:
    path = f"examples/{name}"
    return (ROOT / path).read_text(), path


def mm_source(m: int, n: int, k: int, dtype: str = "f32", name: str = "mm") -> str:
    ta, tb, tc = (f"tensor<{r}x{c}x{dtype}>" for r, c in ((m, k), (k, n), (m, n)))
    return (f"func.func @{name}(%a: {ta}, %b: {tb}) -> {tc} {{\n"
            f"  %c = loom.matmul %a, %b : ({ta}, {tb}) -> {tc}\n"
            f"  func.return %c : {tc}\n}}\n")


def labels(report: Report) -> list[str]:
    return [d.label for group in report.decisions for d in group.decisions]


# --------------------------------------------------------------------------------------
# 1. The loop-nest printer, on hand-written IR


REGISTER_TILE = """
func.func @tile(%a: memref<8x32xf32>, %b: memref<32x32xf32>, %c: memref<8x32xf32>) {
  affine.for %i = 0 to 8 step 2 {
    affine.for %j = 0 to 32 step 16 {
      %c0 = affine.vector_load %c[%i, %j] : memref<8x32xf32>, vector<16xf32>
      %c1 = affine.vector_load %c[%i + 1, %j] : memref<8x32xf32>, vector<16xf32>
      %r0, %r1 = affine.for %k = 0 to 32 iter_args(%acc = %c0, %acc_1 = %c1) -> (vector<16xf32>, vector<16xf32>) {
        %bk = affine.vector_load %b[%k, %j] : memref<32x32xf32>, vector<16xf32>
        %a0 = affine.load %a[%i, %k] : memref<8x32xf32>
        %v0 = vector.broadcast %a0 : f32 to vector<16xf32>
        %n0 = vector.fma %v0, %bk, %acc : vector<16xf32>
        %a1 = affine.load %a[%i + 1, %k] : memref<8x32xf32>
        %v1 = vector.broadcast %a1 : f32 to vector<16xf32>
        %n1 = vector.fma %v1, %bk, %acc_1 : vector<16xf32>
        affine.yield %n0, %n1 : vector<16xf32>, vector<16xf32>
      }
      affine.vector_store %r0, %c[%i, %j] : memref<8x32xf32>, vector<16xf32>
      affine.vector_store %r1, %c[%i + 1, %j] : memref<8x32xf32>, vector<16xf32>
    }
  } {loom.tag = "matmul"}
  func.return
}
"""


def test_register_tile_unrolled_lines_folded():
    """Two rows of a register tile: the copies unroll-jam made fold into one line each,
    their differing offsets in braces; C's block carried across k in registers; j is the
    vector dimension (step = lanes)."""
    assert loop_nest(REGISTER_TILE) == textwrap.dedent("""\
        func @tile(a: f32[8x32], b: f32[32x32], c: f32[8x32]):
          for i in 0..8 step 2:  # nest 'matmul'
            vectorized j in 0..32 step 16:
              unrolled x2: acc = c[i + {0,1}, j:+16]
              for k in 0..32, carrying acc x2:
                unrolled x2: acc += bcast(a[i + {0,1}, k]) * b[k, j:+16]
              unrolled x2: c[i + {0,1}, j:+16] = acc""")


MISC = """
func.func @misc(%x: memref<100xf32>, %y: memref<100xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  affine.for %t = 0 to 100 step 32 {
    affine.for %i = max affine_map<(d0) -> (d0, 10)>(%t) to min affine_map<(d0) -> (d0 + 32, 100)>(%t) {
      "affine.if"(%i) <{condition = affine_set<(d0) : (d0 - 50 >= 0)>}> ({
        %v = affine.load %x[%i - %t + %t] : memref<100xf32>
        %m = arith.mulf %v, %v : f32
        affine.store %m, %y[%i floordiv 2 + 50 - (%i floordiv 2)] : memref<100xf32>
        affine.yield
      }, {
        affine.store %zero, %y[%i] : memref<100xf32>
        affine.yield
      }) : (index) -> ()
    }
  } {loom.tag = "square"}
  "affine.parallel"() <{reductions = [], lowerBoundsMap = affine_map<() -> (0)>, lowerBoundsGroups = dense<1> : vector<1xi32>, upperBoundsMap = affine_map<() -> (4)>, upperBoundsGroups = dense<1> : vector<1xi32>, steps = [1 : i64]}> ({
  ^bb0(%p: index):
    affine.for %q = 0 to 25 {
      %v = affine.load %x[%p * 25 + %q] : memref<100xf32>
      loom.prefetch %y[%q], write, locality<3>, data : memref<100xf32>
      affine.store %v, %y[%p * 25 + %q] : memref<100xf32>
    }
    affine.yield
  }) {loom.num_threads = 2 : i64} : () -> ()
  %w = memref.alloc() : memref<4x4xf32>
  affine.for %r = 0 to 4 {
    affine.for %s = 0 to 4 {
      %u = affine.load %w[%s, %r] : memref<4x4xf32>
      %n = arith.constant 1.000000e+00 : f32
      %e = arith.addf %u, %n : f32
      %z = arith.cmpf ugt, %e, %zero : f32
      %q = arith.select %z, %e, %zero : f32
      affine.store %q, %w[%r, %s] : memref<4x4xf32>
    }
  }
  memref.dealloc %w : memref<4x4xf32>
  func.return
}
"""


def test_bounds_conditions_parallel_loops_and_simplified_subscripts():
    """max/min bounds, an affine.if with its else, subscripts simplified (`i - t + t` is
    i, `i floordiv 2 + 50 - i floordiv 2` is 50), a parallel loop with its threads, a
    prefetch, a buffer's life, relu's compare-and-select as max."""
    assert loop_nest(MISC) == textwrap.dedent("""\
        func @misc(x: f32[100], y: f32[100]):
          for t in 0..100 step 32:  # nest 'square'
            for i in max(t, 10)..min(t + 32, 100):
              if i - 50 >= 0:
                y[50] = x[i] * x[i]
              else:
                y[i] = 0.0
          parallel p in 0..4 (2 threads):
            for q in 0..25:
              prefetch y[q] for writing
              y[p*25 + q] = x[p*25 + q]
          w = alloc f32[4x4]
          for r in 0..4:
            for s in 0..4:
              w[r, s] = max(w[s, r] + 1.0, 0.0)
          free w""")


def test_unnamed_values_get_names_and_lowered_loops_print_alike():
    """After loom-lower-affine the loops are scf.for over index arithmetic, and values the
    IR leaves unnamed get `l0`, `l1`, ...: the same pseudo-code as the affine loops."""
    report = explain_source(mm_source(4, 8, 6), pipeline="naive", stages=("affine", "lowered"), measure_time=False)
    expected = textwrap.dedent("""\
        func @mm(a: f32[4x6], b: f32[6x8], c: f32[4x8]):
          for l0 in 0..4:  # nest 'matmul.init'
            for l1 in 0..8:
              c[l0, l1] = 0.0
          for i in 0..4:  # nest 'matmul'
            for j in 0..8:
              for k in 0..6:
                c[i, j] += a[i, k] * b[k, j]""")
    assert [title for title, _ in report.stages] == ["after convert-loom-to-affine (the textbook loops)",
                                                     "after loom-lower-affine (scf loops)"]
    assert [text for _, text in report.stages] == [expected, expected]


def test_printer_takes_a_module_and_reports_bad_text():
    module = load_module(REGISTER_TILE)
    assert loop_nest(module) == loop_nest(REGISTER_TILE)
    with pytest.raises(compiler.LoomError, match=r"^<source>:\d+:\d+: error: "):
        loop_nest("func.func @f() {\n  %x = arith.bogus\n}")


# --------------------------------------------------------------------------------------
# 2. Reports


def test_matmul_report(monkeypatch):
    """A matmul on the AVX2 plan: its loop nests, the plan's tiles against the caches and
    registers, the traffic per level, the time against the peak."""
    monkeypatch.setenv("LOOM_TARGET", AVX2)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((512, 256)).astype(np.float32), rng.standard_normal((256, 256)).astype(np.float32)
    report = compiler.explain(mm_source(512, 256, 256), a, b)
    text = str(report)
    assert text.startswith("explain @mm (<source>), pipeline default, 1 thread\n"
                           "target: test: L1d 32 KiB, L2 512 KiB, L3 32 MiB, 256-bit vectors x 16 registers, FMA\n"
                           "arrays: float32[512, 256], float32[256, 256] -> float32[512, 256]\n")
    titles = [t for t, _ in report.stages]
    assert titles == ["input (the loom ops)", "after convert-loom-to-affine (the textbook loops)",
                      "after loom-default (the schedule)"]
    assert report.stages[0][1] == ("func @mm(a: f32[512x256], b: f32[256x256]) -> f32[512x256]:\n"
                                   "  c = matmul(a, b)\n  return c")
    scheduled = report.stages[2][1]
    assert "    for k_t in 0..256 step 256:\n      for k_cp in 0..256:\n        for j_panel in 0..16:\n" in scheduled
    assert "unrolled x12: c_acc += bcast(a_pack[" in scheduled  # the 6x16 tile: 12 accumulators of 8 lanes
    assert "vectorized j_cp in 0..16 step 8:" in scheduled  # B's panels copied in vectors
    group, whole = report.decisions
    assert whole.location is None and [(d.label, d.text) for d in whole.decisions] == [
        ("serial", "one thread: every loop stays serial")]
    assert group.location == "<source>:2:3" and group.source.startswith("%c = loom.matmul %a, %b")
    plan = next(d for d in group.decisions if d.label == "plan" and "peeled" not in d.text)
    assert plan.text == "matmul 510x256x256: register tile 6x16"
    assert plan.details[:5] == (
        "register tile MR x NR = 6x16: 12 accumulators of 8 lanes + 2 vectors of B + 1 broadcast of A = 15 of the "
        "16 vector registers",
        "KC=256, all of K: the A sliver KC x MR (256x6 f32) is 6 KiB, 19% of L1d (32 KiB)",
        "MC=384: the A block MC x KC (384x256) is 384 KiB, 75% of L2 (512 KiB)",
        "NC=256, all of N: the B block KC x NC (256x256) is 256 KiB, 0.78% of L3 (32 MiB)",
        "packed: B at k_t in panels of NR columns (KC x NR each), A at i_t in panels of MR rows (KC x MR each)")
    assert plan.details[-1].startswith("pass list: loom-tile{sizes=384,256,256 op=matmul depth=0},")
    for label in ("peeled", "tiled", "interchanged", "packed", "vectorized", "not vectorized", "unroll-jam",
                  "registers", "prefetched", "serial"):
        assert label in labels(report), (label, labels(report))
    assert "loom_default_" not in text  # loom-default's temporary names are the nests' own
    assert "nest 'matmul' (peeled copy 1)" in text and "nest 'matmul' (main part)" in text
    assert [p.name for p in report.plans] == ["matmul 510x256x256", "matmul 2x256x256 (peeled copy 1)"]
    traffic = report.traffic_lines()
    assert traffic[0].split() == ["DRAM->L3", "L2->L1", "L1->registers"]
    assert traffic[1].startswith("matmul 510x256x256 ") and "/fma)" in traffic[1]
    assert traffic[3].startswith("all ")
    m = report.measurement
    assert m.threads == 1 and m.dtype == "f32" and m.calls >= 3 and m.flops == 2 * 512 * 256 * 256
    assert m.gflops > 0 and m.peak == peak.peak_gflops("f32", 1) and m.share_of_peak == m.gflops / m.peak
    assert f"{m.gflops:.2f} GFLOP/s = {m.share_of_peak:.0%} of the machine's f32 FMA peak on 1 thread" in text


def test_matmul_bias_relu_report():
    """The epilogue fused into the matmul's register block: one source op's decisions,
    'fused' among them; unfused (skip=fuse), three source ops, the epilogue's nests
    vectorized."""
    src, path = example("matmul_bias_relu.mlir")
    report = explain_source(src, filename=path, measure_time=False)
    assert [g.location for g in report.decisions] == [f"{path}:3:3"]
    fused = next(d for d in report.decisions[0].decisions if d.pass_name == "loom-fuse-epilogue")
    assert fused.text.startswith("fused add (line 4), relu (line 5) into the 'matmul' nest (line 3)")
    affine = dict(report.stages)["after convert-loom-to-affine (the textbook loops)"]
    assert "c[i, j] += x[i, k] * w[k, j]" in affine and "= max(s[l4, l5], 0.0)" in affine
    scheduled = dict(report.stages)["after loom-default (the schedule)"]
    assert "= max(c_acc + bias[j_t2" in scheduled and "s = alloc" not in scheduled  # (vectors: the host's)
    assert "== measured ==\nnot measured" in str(report)

    unfused = explain_source(src, filename=path, pipeline="loom-default{skip=fuse}", measure_time=False)
    assert [g.location for g in unfused.decisions] == [f"{path}:3:3", f"{path}:4:3", f"{path}:5:3"]
    assert unfused.decisions[2].source == "%r = loom.relu %s : tensor<128x64xf32>"
    assert [d.label for d in unfused.decisions[1].decisions][0] == "vectorized"
    scheduled = dict(unfused.stages)["after loom-default (the schedule)"]
    vectorized = r"vectorized l5 in 0\.\.64 step (\d+):\n      r\[l4, l5:\+\1\] = max\(s\[l4, l5:\+\1\], 0\.0\)"
    assert re.search(vectorized, scheduled)  # by the host's vector width


def test_conv2d_direct_report():
    src, path = example("conv2d.mlir")
    report = explain_source(src, filename=path, measure_time=False)
    strategy = next(d for g in report.decisions for d in g.decisions if d.label == "strategy")
    assert "direct: estimated time over the matmul's: direct +" in strategy.text
    rewrite = next(d for g in report.decisions for d in g.decisions if d.label == "rewrite")
    assert "direct convolution: X staged" in rewrite.text
    scheduled = dict(report.stages)["after loom-default (the schedule)"]
    assert "# nest 'direct.pad'" in scheduled and "x_planes = alloc" in scheduled
    plan = next(d for g in report.decisions for d in g.decisions if d.label == "plan")
    assert any(line.startswith("B read in place (the windows of the staged input)") for line in plan.details)
    assert report.plans and report.plans[0].plan.in_place == "B"


def test_conv2d_im2col_report():
    """skip=direct forces im2col: the patch matrix and a matmul that packs both operands."""
    src, path = example("conv2d.mlir")
    report = explain_source(src, filename=path, pipeline="loom-default{skip=direct}", measure_time=False)
    strategy = next(d for g in report.decisions for d in g.decisions if d.label == "strategy")
    assert "im2col: the direct convolution not allowed here" in strategy.text
    scheduled = dict(report.stages)["after loom-default (the schedule)"]
    assert "# nest 'im2col'" in scheduled and "col = alloc f32[1x3x7x7x28x28]" in scheduled
    assert "parallel c_1 in 0..3" in scheduled or "parallel c in 0..3" in scheduled
    assert report.plans[0].plan.in_place == "" and report.plans[0].plan.pack


def test_naive_pipeline_says_there_is_no_schedule():
    report = explain_source(mm_source(8, 8, 8), pipeline="naive", measure_time=False)
    assert [t for t, _ in report.stages] == ["input (the loom ops)",
                                             "after convert-loom-to-affine (the textbook loops)"]
    assert report.schedule_note.startswith("no schedule: the pipeline 'naive' runs no schedule pass")
    assert report.decisions == [] and report.plans == []
    text = str(report)
    assert "none: no schedule pass ran, or none said anything" in text
    assert "no matmul was planned by the cost model" in text


def test_a_pass_list_is_the_schedule():
    report = explain_source(mm_source(8, 8, 8), pipeline="loom-tile{sizes=4,4,4},loom-interchange{order=0,2,1}",
                            measure_time=False)
    title, text = report.stages[-1]
    assert title == "after the schedule (loom-tile, loom-interchange)"
    assert "for i_t in 0..8 step 4:  # nest 'matmul'" in text
    assert labels(report) == ["not tiled", "tiled", "not interchanged", "interchanged"]  # the zero fill: 2 loops


def test_skipped_steps_are_said(monkeypatch):
    """loom-default{skip=...}: the plan's remark names the steps left out (they were
    silent), and the report does not call A and B packed."""
    monkeypatch.setenv("LOOM_TARGET", AVX2)
    src = mm_source(128, 128, 128)  # A and B do not fit in L1 together: the plan packs
    kernel = compiler.compile(src, pipeline="loom-default{skip=pack,hoist}", remarks=True)
    plans = [r for r in kernel.remarks if "[loom-default] matmul" in r]
    assert plans and all("; steps left out (skip=): pack, hoist; pass list: " in r for r in plans)
    report = explain_source(src, pipeline="loom-default{skip=pack,hoist}", measure_time=False)
    plan = next(d for g in report.decisions for d in g.decisions if d.label == "plan")
    assert "not packed: the packing left out (skip=pack), A and B read where they are" in plan.details


def test_f64_and_a_matrix_vector_product():
    report = compiler.explain(mm_source(1, 512, 512, "f64"))
    plan = next(d for g in report.decisions for d in g.decisions if d.label == "plan")
    assert plan.text.startswith("matmul 1x512x512: 1 row < MR=")
    assert "not packed: B is read once, a copy would only add traffic" in plan.details
    m = report.measurement
    assert m.dtype == "f64" and m.peak == peak.peak_gflops("f64", m.threads)


def test_explain_a_kernel_compiled_with_stages():
    kernel = compiler.compile(mm_source(16, 16, 16), pipeline="naive", stages=True)
    report = compiler.explain(kernel, measure_time=False)
    assert report.pipeline == "naive" and report.entry == "mm"
    with pytest.raises(TypeError, match="compiled with stages=True"):
        compiler.explain(compiler.compile(mm_source(16, 16, 16), pipeline="naive"))


def test_explain_a_jit_function():
    @compiler.jit
    def dense(x, w, b):
        return compiler.relu(x @ w + b)

    rng = np.random.default_rng(1)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((32, 64), (64, 48), (48,)))
    report = compiler.explain(dense, x, w, b)
    assert report.entry == "dense" and report.filename == "<loom.jit test_explain_a_jit_function.<locals>.dense>"
    assert report.plans and report.measurement.gflops > 0
    assert report.decisions[0].location.startswith(__file__)  # the user's own line
    assert "x @ w + b" in str(report)


def test_decisions_are_read_from_the_remarks_payloads():
    """The plan, the nest a temporary tag names and what was hoisted come from the
    payload: a message that says otherwise (here, nothing) changes none of it."""
    plan = plan_matmul(64, 64, 64, host(), 4)
    name = NestName("matmul", 0, 1, 2)
    remarks = [
        Remark("loom-default", "a.mlir:3:3", "-", payload={"plan": plan, "part": 1, "columns": 0, "skipped": ("pack",),
                                                           "passes": (LoomHoistPass(op="matmul"),)}),
        Remark("loom-vectorize", "a.mlir:3:3", "nest 'loom_default_0_1': vectorized", payload={"nest": name}),
        Remark("loom-hoist", "a.mlir:3:3", "-", payload={"loop": "%j", "kinds": ("load", "load"), "nest": name}),
        Remark("loom-hoist", "a.mlir:3:3", "-", payload={"loop": "%i", "kinds": ("arith.constant",), "nest": name}),
        Remark("loom-default", None, "-", missed=True, payload={"threads": 1}),
    ]
    (group, whole), plans = schedule_decisions(remarks, host())
    assert [p.plan for p in plans] == [plan] and plans[0].name == "matmul 64x64x64 (peeled copy 1)"
    planned, vectorized, hoisted = group.decisions
    assert planned.label == "plan" and planned.details[-2:] == ("steps left out (skip=): pack",
                                                                "pass list: loom-hoist{op=matmul}")
    assert vectorized.text == "nest 'matmul' (peeled copy 1): vectorized"
    assert (hoisted.label, hoisted.text) == ("hoisted", "hoisted out of loops %j, %i: 3 ops (load x2, arith.constant)")
    assert [(d.label, d.refused) for d in whole.decisions] == [("serial", True)]


def test_a_refusal_is_the_remarks_missed_flag_not_its_words():
    """Whether a pass changed a nest or left it as it was comes from `missed`: words that
    sound like a refusal in a remark that reports a change, or none in one that reports a
    refusal, change nothing."""
    remarks = [
        Remark("loom-vectorize", "a.mlir:3:3", "vectorized: it was not vectorized before"),
        Remark("loom-parallelize", "a.mlir:3:3", "loop %i at depth 1 is not parallel: a dependence", missed=True),
        Remark("loom-unroll", "a.mlir:3:3", "nothing to do", missed=True),
        Remark("loom-fuse-epilogue", "a.mlir:3:3", "relu fused, nothing refused"),
    ]
    (group,), _ = schedule_decisions(remarks, host())
    assert [(d.label, d.refused) for d in group.decisions] == [
        ("vectorized", False), ("serial", True), ("not unrolled", True), ("fused", False)]



# --------------------------------------------------------------------------------------
# 3. Errors


def test_bad_source_is_located():
    with pytest.raises(compiler.LoomError) as e:
        explain_source("func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n  %r = loom.relu %b : tensor<4xf32>\n"
                       "  func.return %r : tensor<4xf32>\n}\n", filename="bad.mlir")
    assert str(e.value).startswith("bad.mlir:2:")


@pytest.mark.parametrize("arrays, error, match", [
    ((np.zeros((4, 4), np.float32),), TypeError, "takes 2 arrays"),
    ((np.zeros((4, 4), np.float64), np.zeros((4, 4), np.float32)), TypeError, "has dtype float64"),
    ((np.zeros((4, 5), np.float32), np.zeros((4, 4), np.float32)), ValueError, r"has shape \(4, 5\)"),
])
def test_bad_arrays(arrays, error, match):
    with pytest.raises(error, match=match):
        compiler.explain(mm_source(4, 4, 4), *arrays)


def test_bad_arguments():
    with pytest.raises(TypeError, match="explain\\(\\) takes a @compiler.jit function, MLIR text"):
        compiler.explain(42)
    with pytest.raises(ValueError, match="unknown stage 'nest'"):
        explain_source(mm_source(4, 4, 4), stages=("nest",), measure_time=False)
    with pytest.raises(compiler.LoomError, match="unknown pass or pipeline 'bogus'"):
        explain_source(mm_source(4, 4, 4), pipeline="bogus")


# --------------------------------------------------------------------------------------
# 4. loom-run --explain


def run(*args):
    proc = subprocess.run([str(BIN / "loom-run"), *map(str, args)], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ})
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_loom_run_explain():
    p = run("examples/matmul.mlir", "--explain", "--budget", "0.05", "--rounds", "1", "--threads", "1")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert out.startswith("examples/matmul.mlir: @matmul (256x256 float32, 256x256 float32)  pipeline=default\n"
                          "  check    OK")
    for heading in ("explain @matmul (examples/matmul.mlir), pipeline default, 1 thread",
                    "== loop nest input (the loom ops) ==", "== loop nest after loom-default (the schedule) ==",
                    "== schedule decisions ==", "examples/matmul.mlir:3:3: %c = loom.matmul %a, %b",
                    "== estimated data movement (cost model) ==", "== measured ==",
                    "the median measured above, on 1 thread", "of the machine's f32 FMA peak on 1 thread"):
        assert heading in out, heading


def test_loom_run_explain_bad_file(tmp_path):
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @f() {\n  %x = loom.relu %y : tensor<4xf32>\n}\n")
    p = run(bad, "--explain")
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.startswith(f"{bad}:2:") and ": error: " in p.stderr

"""The matmul benchmarks behind `loom-bench`.

- `run_stages` (`--stages`) retells the classic report on CPU matmul optimizations with
  Loom's passes: each stage is a pipeline, checked against numpy, timed beside numpy in
  the same process (runs interleaved, medians), its loop nest printable.
- `run_shapes` (`--shapes`) compiles one pipeline (the cost model's `default`) for a list
  of matmul shapes M x N x K, square and not, and times each beside numpy (and torch,
  when it is installed); `plot_shapes` draws the result as a PNG (matplotlib, the
  `bench` extra).
- `run_ablation` (`--ablation`) times the default pipeline and the default pipeline
  minus each of its steps (`loom-default{skip=STEP}`), each beside numpy.

Every kernel is checked against the float64 numpy product within `error_bound`.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from itertools import groupby

import numpy as np

from compiler.driver import compile
from compiler.measure.runner import SETTLE, error_bound, timed_rounds
from passes.schedule import loom_default
from tools.bench import peers as anchors
from tools.bench.common import (
    Shape, bar_chart, bench_machine, cell, compile_fresh, matmul_source, peak_line, shape_label, write_plot,
)


@dataclass(frozen=True)
class Stage:
    name: str
    pipeline: Callable[[int], str]  # N -> pass pipeline


def _tile(n: int) -> int:
    return max(1, n // 8)


#: i, j, k -> i, k, j: B and C are then read along rows in the innermost loop.
IKJ = "loom-interchange{order=0,2,1 op=matmul}"

STAGES: list[Stage] = [
    Stage("naive (i, j, k)", lambda n: "naive"),
    Stage("tiling (N/8)", lambda n: f"loom-tile{{sizes={_tile(n)},{_tile(n)},{_tile(n)} op=matmul}}"),
    Stage("permutation (i, k, j)", lambda n: IKJ),
    Stage("permutation + invariant", lambda n: f"{IKJ},loom-hoist"),
    Stage("invariant + unroll s=2", lambda n: "loom-hoist,loom-unroll{factor=2 op=matmul}"),
    Stage("invariant + unroll s=4", lambda n: "loom-hoist,loom-unroll{factor=4 op=matmul}"),
    Stage("permutation + invariant + unroll s=4", lambda n: f"{IKJ},loom-hoist,loom-unroll{{factor=4 op=matmul}}"),
]

SIZES = [8, 32, 128, 256, 512, 1024]


@dataclass
class Row:
    n: int
    stage: str
    pipeline: str
    seconds: float
    gflops: float
    numpy_seconds: float
    numpy_gflops: float
    max_err: float
    bound: float
    compile_seconds: float

    @property
    def ok(self) -> bool:
        return self.max_err <= self.bound


def run_stages(
    sizes=SIZES, stages=STAGES, *, repeat: int = 10, budget: float = 2.0, seed: int = 0,
    on_row: Callable[[Row, dict], None] | None = None, keep_stages: bool = False,
) -> list[Row]:
    """Every stage at every size; `on_row(row, kernel_info)` is called as rows come (its
    "stages": the IR after each pass, when `keep_stages`)."""
    rows = []
    rng = np.random.default_rng(seed)
    for n in sizes:
        a = rng.standard_normal((n, n)).astype(np.float32)
        b = rng.standard_normal((n, n)).astype(np.float32)
        want = a.astype(np.float64) @ b.astype(np.float64)
        bound = error_bound(n, np.dtype(np.float32), float(np.abs(want).max()))
        flops = 2.0 * n**3
        for stage in stages:
            pipeline = stage.pipeline(n)
            t0 = time.perf_counter()
            kernel = compile(matmul_source(n), pipeline=pipeline, stages=keep_stages)
            compile_seconds = time.perf_counter() - t0
            got = kernel(a, b)  # also the warm-up run
            err = float(np.abs(got - want).max())
            timing = timed_rounds([lambda: kernel(a, b), lambda: np.matmul(a, b)], budget=budget, at_most=repeat)
            seconds, numpy_seconds = timing.median(0), timing.median(1)
            row = Row(n, stage.name, pipeline, seconds, flops / seconds / 1e9, numpy_seconds,
                      flops / numpy_seconds / 1e9, err, bound, compile_seconds)
            rows.append(row)
            if on_row:
                on_row(row, {"stages": kernel.stages})
    return rows


def markdown(rows: list[Row]) -> str:
    """One line per (N, stage), then numpy's line for that N (the median of its timings
    interleaved with every stage)."""
    out = ["| N | stage | seconds | GFLOP/s | speedup vs naive | loom/numpy | check |",
           "|---:|---|---:|---:|---:|---:|---|"]
    for n, group in groupby(rows, key=lambda r: r.n):
        group = list(group)
        naive = group[0].seconds
        for r in group:
            out.append(f"| {n} | {r.stage} | {r.seconds:.3g} | {r.gflops:.2f} | {naive / r.seconds:.1f}x "
                       f"| {r.numpy_seconds / r.seconds:.3f} | {'ok' if r.ok else 'MISMATCH'} |")
        np_s = float(np.median([r.numpy_seconds for r in group]))
        out.append(f"| {n} | numpy (same process) | {np_s:.3g} | {2.0 * n**3 / np_s / 1e9:.2f} "
                   f"| {naive / np_s:.1f}x | 1.000 | |")
    return "\n".join(out)


def as_json(rows: list[Row]) -> list[dict]:
    return [{**asdict(r), "ok": r.ok} for r in rows]


def stages_mode(args, blas: str) -> int:
    """`loom-bench --stages`: the table, and each stage's loop nest with --show-ir."""
    shown: set[str] = set()

    def on_row(row, info):
        if not args.json:
            print(f"  N={row.n:<5} {row.stage:<40} {row.seconds:.4g} s  {row.gflops:7.2f} GFLOP/s"
                  f"  (numpy {row.numpy_gflops:.2f})", file=sys.stderr)
        if args.show_ir and row.stage not in shown:
            shown.add(row.stage)
            print(f"\n// ----- {row.stage}: pipeline {row.pipeline!r}, N={row.n}", file=sys.stderr)
            affine_ir = [ir for name, ir in info["stages"].items() if "affine.for" in ir]
            print(affine_ir[-1] if affine_ir else "", file=sys.stderr)

    rows = run_stages(args.sizes, repeat=args.repeat, budget=args.budget, on_row=on_row, keep_stages=args.show_ir)
    return _report(args, blas, rows, markdown, as_json)


# --------------------------------------------------------------------------- shapes

#: `loom-bench --shapes`: square sizes, then transformer-like and awkward (odd, prime-ish,
#: matrix-vector) shapes.
SHAPES: list[Shape] = [(64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024),
                       (2048, 2048, 2048), (1000, 1000, 1000), (128, 768, 3072), (197, 768, 768),
                       (127, 255, 511), (1, 4096, 4096)]
#: `loom-bench --ablation`: one square size and one with remainders everywhere.
ABLATION_SHAPES: list[Shape] = [(1024, 1024, 1024), (127, 255, 511)]


def torch_matmul(a: np.ndarray, b: np.ndarray, threads: int = 1) -> Callable[[], object] | None:
    """`torch.matmul` on tensors sharing a's and b's memory, on `threads` threads; None
    when torch is not installed."""
    try:
        import torch
    except (ImportError, OSError):  # not installed, or its libraries fail to load
        return None
    torch.set_num_threads(threads)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    return lambda: torch.matmul(ta, tb)


@dataclass
class Measurement:
    """One kernel's check and timing beside numpy (and torch) on one shape."""
    shape: Shape
    pipeline: str
    seconds: float
    gflops: float
    numpy_seconds: float
    numpy_gflops: float
    torch_seconds: float | None
    torch_gflops: float | None
    max_err: float
    bound: float
    compile_seconds: float
    #: loom/numpy of each round (`rounds` > 1): the spread a single run hides
    ratios: tuple[float, ...] = ()
    #: the threads Loom and numpy (and torch) ran on; with more than one, Loom's own time
    #: on one thread, timed in the same rounds
    threads: int = 1
    one_thread_seconds: float | None = None
    #: Loom's one-thread time over its `threads`-thread time, per round (`rounds` > 1)
    speedups: tuple[float, ...] = ()
    #: B passed as the transpose of an N x K array (`x @ w.T`)
    transposed: bool = False
    #: ONNX Runtime's and OpenVINO's seconds and max errors, by name (`--peers`)
    peers: dict[str, float] = field(default_factory=dict)
    peer_errors: dict[str, float] = field(default_factory=dict)

    def problem_gflops(self, seconds: float) -> float:
        """GFLOP/s of this shape's matmul done in `seconds`."""
        return self.gflops * self.seconds / seconds

    @property
    def speedup(self) -> float | None:
        """Loom on `threads` threads over Loom on one (with rounds, the median of each
        round's: a shared machine's slow phase then moves both times of a round alike)."""
        if self.speedups:
            return float(np.median(self.speedups))
        return None if self.one_thread_seconds is None else self.one_thread_seconds / self.seconds

    @property
    def ratio(self) -> float:
        """loom/numpy speed: above 1, Loom is faster (with rounds, their median)."""
        return float(np.median(self.ratios)) if self.ratios else self.numpy_seconds / self.seconds

    @property
    def ok(self) -> bool:
        return bool(self.max_err <= self.bound)


class _Problem:
    """A shape's random inputs, float64 reference and error bound; `transposed`: B is the
    transpose of an N x K array (`x @ w.T`), for Loom, numpy and torch alike."""

    def __init__(self, shape: Shape, rng: np.random.Generator, threads: int = 1, transposed: bool = False):
        m, n, k = self.shape = shape
        self.transposed = transposed
        self.a = rng.standard_normal((m, k)).astype(np.float32)
        #: what the kernel is passed for B: B itself, or W (N x K) whose transpose B is
        self.b_arg = rng.standard_normal((n, k) if transposed else (k, n)).astype(np.float32)
        self.b = self.b_arg.T if transposed else self.b_arg
        self.want = self.a.astype(np.float64) @ self.b.astype(np.float64)
        self.bound = error_bound(k, np.dtype(np.float32), float(np.abs(self.want).max()))
        self.flops = 2.0 * m * n * k
        self.torch = torch_matmul(self.a, self.b, threads)


def measure(problem: _Problem, pipeline: str, *, repeat: int, budget: float, rounds: int = 1,
            threads: int = 1, with_runtimes: bool = False) -> Measurement:
    """Compile `pipeline` for the problem's shape, check it, and time it interleaved with
    numpy (and torch): `timed_rounds`. With `rounds` > 1 the times are the medians over
    the rounds, and each round's loom/numpy is kept (on a shared machine the ratio of one
    round can be a few percent off). With `threads` > 1 the kernel is compiled for that
    many threads (numpy's and torch's pools are set so by the caller), a one-thread kernel
    is timed in the same rounds, and each function's runs come in a block after a sleep
    (`SETTLE`: the other library's idle threads stop spinning). `with_runtimes`: ONNX
    Runtime's and OpenVINO's kernels too (tools/bench/peers.py), each checked once."""
    a, b = problem.a, problem.b_arg
    source = matmul_source(*problem.shape, transposed=problem.transposed)
    kernel, compile_seconds = compile_fresh(source, pipeline, threads)
    got = kernel(a, b)  # also the warm-up run
    err = float(np.abs(got - problem.want).max())
    fns = [lambda: kernel(a, b), lambda: np.matmul(a, problem.b)] + ([problem.torch] if problem.torch else [])
    runtimes = anchors.kernel_peers("matmul", problem.a, problem.b, "f32", threads) if with_runtimes else []
    first_runtime = len(fns)
    fns += [p.run for p in runtimes]
    if threads > 1:
        serial = compile(source, pipeline=pipeline, num_threads=1)
        err = max(err, float(np.abs(serial(a, b) - problem.want).max()))
        fns.append(lambda: serial(a, b))
    for f in fns[1:]:
        f()
    timing = timed_rounds(fns, budget=budget, at_most=repeat, rounds=rounds, settle=SETTLE if threads > 1 else 0.0)
    seconds, numpy_seconds = timing.median(0), timing.median(1)
    torch_seconds = timing.median(2) if problem.torch else None
    one_thread = timing.median(len(fns) - 1) if threads > 1 else None
    ratios = timing.ratios() if rounds > 1 else ()
    speedups = timing.ratios(len(fns) - 1) if rounds > 1 and threads > 1 else ()
    f = problem.flops / 1e9
    return Measurement(problem.shape, pipeline, seconds, f / seconds, numpy_seconds, f / numpy_seconds,
                       torch_seconds, None if torch_seconds is None else f / torch_seconds,
                       err, problem.bound, compile_seconds, ratios, threads, one_thread, speedups,
                       problem.transposed, {p.name: timing.median(first_runtime + i) for i, p in enumerate(runtimes)},
                       {p.name: p.check(problem.want) for p in runtimes})


def run_shapes(
    shapes: Sequence[Shape] = SHAPES, *, pipeline: str = "default", repeat: int = 10, budget: float = 2.0,
    seed: int = 0, rounds: int = 1, threads: int = 1, transposed: bool = False,
    on_row: Callable[[Measurement], None] | None = None, with_runtimes: bool = False,
) -> list[Measurement]:
    """`pipeline` at every shape, each beside numpy (and torch), `rounds` times, on
    `threads` threads (see `measure`), B transposed or not (`_Problem`); `on_row(row)` as
    rows come."""
    rows = []
    rng = np.random.default_rng(seed)
    for shape in shapes:
        row = measure(_Problem(shape, rng, threads, transposed), pipeline, repeat=repeat, budget=budget, rounds=rounds,
                      threads=threads, with_runtimes=with_runtimes)
        rows.append(row)
        if on_row:
            on_row(row)
    return rows


def markdown_shapes(rows: list[Measurement]) -> str:
    """The table; with rounds, loom/numpy is their median and a column gives their range;
    with threads, Loom's one-thread GFLOP/s and the speedup over it."""
    rounds = max((len(r.ratios) for r in rows), default=0)
    threads = max((r.threads for r in rows), default=1)
    spread = f" loom/numpy min-max ({rounds} rounds) |" if rounds else ""
    serial = " Loom 1 thread GFLOP/s | speedup |" if threads > 1 else ""
    names = list(dict.fromkeys(name for r in rows for name in r.peers))
    out = ["| shape M×N×K | Loom GFLOP/s | numpy GFLOP/s | loom/numpy |" + spread + serial
           + " torch GFLOP/s |" + "".join(f" {name} GFLOP/s |" for name in names) + " compile s | check |",
           "|---|---:|---:|---:|" + "---:|" * bool(rounds) + "---:|---:|" * (threads > 1) + "---:|" * (1 + len(names))
           + "---:|---|"]
    for r in rows:
        low_high = f" {min(r.ratios):.3f}-{max(r.ratios):.3f} |" if r.ratios else " - |" * bool(rounds)
        one = (f" {r.problem_gflops(r.one_thread_seconds):.2f} | {r.speedup:.2f}x |"
               if r.one_thread_seconds is not None else " - | - |" * (threads > 1))
        out.append(f"| {shape_label(r.shape)} | {r.gflops:.2f} | {r.numpy_gflops:.2f} | {r.ratio:.3f} |{low_high}"
                   f"{one} {cell(r.torch_gflops, '.2f')} |"
                   + "".join(f" {cell(r.problem_gflops(r.peers[n]) if n in r.peers else None, '.2f')} |" for n in names)
                   + f" {r.compile_seconds:.2f} | {'ok' if r.ok else 'MISMATCH'} |")
    return "\n".join(out) + anchors.errors_note({shape_label(r.shape): r.peer_errors for r in rows},
                                                 {shape_label(r.shape): r.bound for r in rows})


def shapes_json(rows: list[Measurement]) -> list[dict]:
    return [{"shape": list(r.shape), "pipeline": r.pipeline, "seconds": r.seconds, "gflops": r.gflops,
             "numpy_seconds": r.numpy_seconds, "numpy_gflops": r.numpy_gflops, "ratio": r.ratio,
             "torch_seconds": r.torch_seconds, "torch_gflops": r.torch_gflops, "max_err": r.max_err,
             "bound": r.bound, "ok": r.ok, "compile_seconds": r.compile_seconds, "ratios": list(r.ratios),
             "threads": r.threads, "one_thread_seconds": r.one_thread_seconds, "speedup": r.speedup,
             "transposed": r.transposed,
             "peers": {n: {"seconds": t, "gflops": r.problem_gflops(t), "max_err": r.peer_errors[n]}
                       for n, t in r.peers.items()}}
            for r in rows]


def shapes_mode(args, blas: str) -> int:
    """`loom-bench --shapes`: the table, and the plot with --plot."""
    rows = run_shapes(args.shapes_list, pipeline=args.pipeline, repeat=args.repeat, budget=args.budget,
                      rounds=args.rounds, threads=args.threads, transposed=args.transposed,
                      on_row=None if args.json else _progress, with_runtimes=args.peers)
    return _report(args, blas, rows, markdown_shapes, shapes_json)


def _progress(row) -> None:
    torch = "" if row.torch_gflops is None else f", torch {row.torch_gflops:.2f}"
    rounds = f", loom/numpy {min(row.ratios):.3f}-{max(row.ratios):.3f} over {len(row.ratios)} rounds" if row.ratios else ""
    serial = f", {row.speedup:.2f}x Loom's one thread" if row.speedup is not None else ""
    print(f"  {shape_label(row.shape):<14} {row.seconds:.4g} s  {row.gflops:7.2f} GFLOP/s"
          f"  (numpy {row.numpy_gflops:.2f}{torch}{rounds}{serial})  compile {row.compile_seconds:.2f} s"
          f"{'' if row.ok else '  MISMATCH'}", file=sys.stderr)


def plot_shapes(rows: list[Measurement], path, *, title: str = "") -> None:
    """A PNG bar chart of GFLOP/s per shape: Loom beside numpy (and torch), the loom/numpy
    ratio above each group."""
    series = [("Loom", [r.gflops for r in rows]), ("numpy", [r.numpy_gflops for r in rows])]
    if any(r.torch_gflops is not None for r in rows):
        series.append(("torch", [r.torch_gflops or 0.0 for r in rows]))
    bar_chart(path, [shape_label(r.shape) for r in rows], series, [(f"{r.ratio:.2f}x", r.ok) for r in rows],
              xlabel="shape M×N×K (C = A[M,K] @ B[K,N]); above each group: loom/numpy speed",
              threads=max(r.threads for r in rows), title=title)


# --------------------------------------------------------------------------- ablation


def default_minus(step: str | None) -> str:
    """The default pipeline (step None), or the default pipeline without `step`."""
    return "default" if step is None else f"loom-default{{skip={step}}}"


@dataclass
class AblationRow:
    variant: str  # "default", "default - pack", ...
    slowdown: float  # seconds / the default's seconds at this shape (above 1: the step helps)
    m: Measurement

    @property
    def ok(self) -> bool:
        return self.m.ok


def run_ablation(
    shapes: Sequence[Shape] = ABLATION_SHAPES, *, steps: Sequence[str] | None = None,
    pipeline_for: Callable[[str | None], str] | None = None,
    repeat: int = 10, budget: float = 2.0, seed: int = 0,
    on_row: Callable[[AblationRow], None] | None = None,
) -> list[AblationRow]:
    """At each shape, `pipeline_for(None)` (the default pipeline), then
    `pipeline_for(step)` for each step (the default without it), each timed beside numpy.
    `steps` defaults to `passes.schedule.loom_default.MATMUL_STEPS`, `pipeline_for` to `default_minus`."""
    steps = loom_default.MATMUL_STEPS if steps is None else steps
    pipeline_for = pipeline_for or default_minus
    rows = []
    rng = np.random.default_rng(seed)
    for shape in shapes:
        problem = _Problem(shape, rng)
        base = None
        for step in (None, *steps):
            m = measure(problem, pipeline_for(step), repeat=repeat, budget=budget)
            if base is None:
                base = m
            row = AblationRow("default" if step is None else f"default - {step}", m.seconds / base.seconds, m)
            rows.append(row)
            if on_row:
                on_row(row)
    return rows


def markdown_ablation(rows: list[AblationRow]) -> str:
    out = ["| shape | variant | GFLOP/s | loom/numpy | slowdown vs default | check |",
           "|---|---|---:|---:|---:|---|"]
    for r in rows:
        out.append(f"| {shape_label(r.m.shape)} | {r.variant} | {r.m.gflops:.2f} | {r.m.ratio:.3f} "
                   f"| {r.slowdown:.2f}x | {'ok' if r.ok else 'MISMATCH'} |")
    return "\n".join(out)


def ablation_json(rows: list[AblationRow]) -> list[dict]:
    return [{"variant": r.variant, **d, "slowdown": r.slowdown}
            for r, d in zip(rows, shapes_json([r.m for r in rows]))]


def ablation_mode(args, blas: str) -> int:
    """`loom-bench --ablation`: the table."""
    rows = run_ablation(args.shapes_list, repeat=args.repeat, budget=args.budget,
                        on_row=None if args.json else _progress_ablation)
    return _report(args, blas, rows, markdown_ablation, ablation_json)


def _progress_ablation(row) -> None:
    m = row.m
    print(f"  {shape_label(m.shape):<14} {row.variant:<24} {m.seconds:.4g} s  {m.gflops:7.2f} GFLOP/s"
          f"  (numpy {m.numpy_gflops:.2f})  x{row.slowdown:.2f} vs default"
          f"{'' if row.ok else '  MISMATCH'}", file=sys.stderr)


def _report(args, blas: str, rows, table, as_json) -> int:
    """Print the rows of --stages, --shapes or --ablation (`table` or `as_json`), draw the
    plot asked for; the exit status."""
    machine = bench_machine()
    threads = args.threads if args.shapes else 1
    if args.json:
        print(json.dumps({"machine": machine, "blas": blas, "rows": as_json(rows)}, indent=1))
    else:
        print(f"machine: {machine}\n{peak_line(threads)}\n{blas}\n")
        if args.shapes:
            b = ", B = W.T (x @ w.T, W an N x K array)" if args.transposed else ""
            print(f"pipeline: {args.pipeline}, threads: {args.threads}{b}"
                  + (f"\n{anchors.header()}" if args.peers else "") + "\n")
        print(table(rows))
    if args.plot:
        threads = "one thread" if args.threads == 1 else f"{args.threads} threads"
        if not write_plot(args.plot, lambda: plot_shapes(
                rows, args.plot, title=f"Loom ({args.pipeline}) vs numpy: f32 matmul, {threads}\n{machine}\n{blas}")):
            return 1
    return 0 if all(r.ok for r in rows) else 1

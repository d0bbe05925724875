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

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from itertools import groupby

import numpy as np

from compiler.driver import compile
from compiler.jit.engine import Timings
from compiler.measure.runner import SETTLE, error_bound, run_and_check, timed_rounds


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


def matmul_source(m: int, n: int | None = None, k: int | None = None, *, dtype: str = "f32",
                  transposed: bool = False) -> str:
    """`@matmul`: C[M, N] = A[M, K] @ B[K, N]; `matmul_source(n)` is the square n x n x n.
    `transposed`: the function takes W[N, K] and multiplies by its transpose (`x @ w.T`, a
    linear layer's weight as torch stores it: B a view, never copied by the caller)."""
    n = m if n is None else n
    k = m if k is None else k
    ta, tb, tc, tw = (f"tensor<{r}x{c}x{dtype}>" for r, c in ((m, k), (k, n), (m, n), (n, k)))
    if transposed:
        return (f"func.func @matmul(%a: {ta}, %w: {tw}) -> {tc} {{\n"
                f"  %b = loom.transpose %w {{perm = array<i64: 1, 0>}} : {tw} -> {tb}\n"
                f"  %c = loom.matmul %a, %b : ({ta}, {tb}) -> {tc}\n"
                f"  func.return %c : {tc}\n}}\n")
    return (f"func.func @matmul(%a: {ta}, %b: {tb}) -> {tc} {{\n"
            f"  %c = loom.matmul %a, %b : ({ta}, {tb}) -> {tc}\n"
            f"  func.return %c : {tc}\n}}\n")


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


# --------------------------------------------------------------------------- shapes

Shape = tuple[int, int, int]  # (M, N, K): C[M, N] = A[M, K] @ B[K, N]

#: `loom-bench --shapes`: square sizes, then transformer-like and awkward (odd, prime-ish,
#: matrix-vector) shapes.
SHAPES: list[Shape] = [(64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024),
                       (2048, 2048, 2048), (1000, 1000, 1000), (128, 768, 3072), (197, 768, 768),
                       (127, 255, 511), (1, 4096, 4096)]
#: `loom-bench --ablation`: one square size and one with remainders everywhere.
ABLATION_SHAPES: list[Shape] = [(1024, 1024, 1024), (127, 255, 511)]


def shape_label(shape: Shape) -> str:
    """(M, N, K) -> `MxNxK`, what `loom-bench --shapes-list` reads."""
    return "x".join(map(str, shape))


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


def compile_fresh(source: str, pipeline: str, num_threads: int | None = None, remarks: bool = False):
    """compile() and its wall time, a real compile: a compile asked for its timings is
    never served from the cache."""
    t0 = time.perf_counter()
    kernel = compile(source, pipeline=pipeline, num_threads=num_threads, timings={}, remarks=remarks)
    return kernel, time.perf_counter() - t0


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
            threads: int = 1) -> Measurement:
    """Compile `pipeline` for the problem's shape, check it, and time it interleaved with
    numpy (and torch): `timed_rounds`. With `rounds` > 1 the times are the medians over
    the rounds, and each round's loom/numpy is kept (on a shared machine the ratio of one
    round can be a few percent off). With `threads` > 1 the kernel is compiled for that
    many threads (numpy's and torch's pools are set so by the caller), a one-thread kernel
    is timed in the same rounds, and each function's runs come in a block after a sleep
    (`SETTLE`: the other library's idle threads stop spinning)."""
    a, b = problem.a, problem.b_arg
    source = matmul_source(*problem.shape, transposed=problem.transposed)
    kernel, compile_seconds = compile_fresh(source, pipeline, threads)
    got = kernel(a, b)  # also the warm-up run
    err = float(np.abs(got - problem.want).max())
    fns = [lambda: kernel(a, b), lambda: np.matmul(a, problem.b)] + ([problem.torch] if problem.torch else [])
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
                       problem.transposed)


def run_shapes(
    shapes: Sequence[Shape] = SHAPES, *, pipeline: str = "default", repeat: int = 10, budget: float = 2.0,
    seed: int = 0, rounds: int = 1, threads: int = 1, transposed: bool = False,
    on_row: Callable[[Measurement], None] | None = None,
) -> list[Measurement]:
    """`pipeline` at every shape, each beside numpy (and torch), `rounds` times, on
    `threads` threads (see `measure`), B transposed or not (`_Problem`); `on_row(row)` as
    rows come."""
    rows = []
    rng = np.random.default_rng(seed)
    for shape in shapes:
        row = measure(_Problem(shape, rng, threads, transposed), pipeline, repeat=repeat, budget=budget, rounds=rounds,
                      threads=threads)
        rows.append(row)
        if on_row:
            on_row(row)
    return rows


def _fmt(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def markdown_shapes(rows: list[Measurement]) -> str:
    """The table; with rounds, loom/numpy is their median and a column gives their range;
    with threads, Loom's one-thread GFLOP/s and the speedup over it."""
    rounds = max((len(r.ratios) for r in rows), default=0)
    threads = max((r.threads for r in rows), default=1)
    spread = f" loom/numpy min-max ({rounds} rounds) |" if rounds else ""
    serial = " Loom 1 thread GFLOP/s | speedup |" if threads > 1 else ""
    out = ["| shape M×N×K | Loom GFLOP/s | numpy GFLOP/s | loom/numpy |" + spread + serial
           + " torch GFLOP/s | compile s | check |",
           "|---|---:|---:|---:|" + "---:|" * bool(rounds) + "---:|---:|" * (threads > 1) + "---:|---:|---|"]
    for r in rows:
        low_high = f" {min(r.ratios):.3f}-{max(r.ratios):.3f} |" if r.ratios else " - |" * bool(rounds)
        one = (f" {r.problem_gflops(r.one_thread_seconds):.2f} | {r.speedup:.2f}x |"
               if r.one_thread_seconds is not None else " - | - |" * (threads > 1))
        out.append(f"| {shape_label(r.shape)} | {r.gflops:.2f} | {r.numpy_gflops:.2f} | {r.ratio:.3f} |{low_high}"
                   f"{one} {_fmt(r.torch_gflops)} | {r.compile_seconds:.2f} | {'ok' if r.ok else 'MISMATCH'} |")
    return "\n".join(out)


def shapes_json(rows: list[Measurement]) -> list[dict]:
    return [{"shape": list(r.shape), "pipeline": r.pipeline, "seconds": r.seconds, "gflops": r.gflops,
             "numpy_seconds": r.numpy_seconds, "numpy_gflops": r.numpy_gflops, "ratio": r.ratio,
             "torch_seconds": r.torch_seconds, "torch_gflops": r.torch_gflops, "max_err": r.max_err,
             "bound": r.bound, "ok": r.ok, "compile_seconds": r.compile_seconds, "ratios": list(r.ratios),
             "threads": r.threads, "one_thread_seconds": r.one_thread_seconds, "speedup": r.speedup,
             "transposed": r.transposed}
            for r in rows]


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
    if steps is None:
        from passes.schedule.loom_default import MATMUL_STEPS as steps
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


# --------------------------------------------------------------------------- compile time

#: `loom-bench --compile`: the chains' lengths (elementwise ops in a row)
CHAIN_LENGTHS = [1000]


def chain_source(n: int, shape: tuple[int, ...] = (64, 64), dtype: str = "f32") -> str:
    """`@chain`: n elementwise adds in a row, %x(k) = %x(k-1) + %b, the last one returned
    (how a network's elementwise tail grows: one loop nest per op)."""
    t = f"tensor<{'x'.join(map(str, shape))}x{dtype}>"
    lines = [f"func.func @chain(%x0: {t}, %b: {t}) -> {t} {{"]
    lines += [f"  %x{k} = loom.add %x{k - 1}, %b : ({t}, {t}) -> {t}" for k in range(1, n + 1)]
    lines.append(f"  func.return %x{n} : {t}\n}}\n")
    return "\n".join(lines)


@dataclass
class CompileRow:
    """One kernel's compile time by stage, and its compile() checked against numpy."""

    name: str
    pipeline: str
    stages: Timings
    compile_seconds: float  # wall seconds of compile() itself, for the kernel checked
    max_err: float
    bound: float

    @property
    def cpu(self) -> float:
        return sum(c for c, _ in self.stages.values())

    @property
    def wall(self) -> float:
        return sum(w for _, w in self.stages.values())

    @property
    def ok(self) -> bool:
        return bool(self.max_err <= self.bound)


def checked_compile(name: str, source: str, pipeline: str) -> CompileRow:
    """Compile `source` once, timed stage by stage (`compile(timings=...)`: a real
    compile, never a cache hit), and check the kernel against the float64 reference on
    random inputs."""
    timings: Timings = {}
    report = run_and_check(source, filename=name, pipeline=pipeline, repeat=3, budget=1e-3, rounds=1,
                           timings=timings)
    return CompileRow(name, pipeline, timings, report.compile_seconds, report.max_err, report.bound)


#: run in a fresh process by `cold_compile`: the import of Loom, then the matmul compiled
#: cold (the first compile: lazy imports, LLVM's set-up) and warm, the warm one checked
_COLD_PROBE = """
import json, sys, time
cpu, wall = time.process_time(), time.perf_counter()
import compiler
imported = (time.process_time() - cpu, time.perf_counter() - wall)
from tools.bench.matmul import checked_compile, matmul_source
source = matmul_source(*json.loads(sys.argv[1]))
cold = {}
try:
    compiler.compile(source, pipeline="default", timings=cold)
    warm = checked_compile("matmul", source, "default")
except (ValueError, TypeError, MemoryError) as e:  # a matmul too big for memory, say
    print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
    sys.exit(0)
print(json.dumps({"import": imported, "cold": cold, "warm": warm.stages, "compile_seconds": warm.compile_seconds,
                  "max_err": warm.max_err, "bound": warm.bound}))
"""


def cold_compile(shape: Shape = (1024, 1024, 1024)) -> dict:
    """In a fresh Python process: the CPU and wall seconds of `import compiler` ("import"),
    and the stages of the default pipeline's matmul of `shape` compiled first ("cold")
    and again ("warm"); the warm kernel's compile() seconds and check ("compile_seconds",
    "max_err", "bound")."""
    import json
    import subprocess
    import sys

    from passes.support.diagnostics import LoomError

    done = subprocess.run([sys.executable, "-c", _COLD_PROBE, json.dumps(list(shape))],
                          capture_output=True, text=True, check=False)
    what = f"the matmul {shape_label(shape)}, compiled in a fresh process"
    if done.returncode != 0:  # a crash or a bug: its traceback's last line
        last = next((line for line in reversed(done.stderr.splitlines()) if line.strip()), "")
        raise LoomError(f"{what}, failed (exit status {done.returncode}): {last.strip()}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if "error" in result:
        raise LoomError(f"{what}: {result['error']}")
    for when in ("cold", "warm"):
        result[when] = {stage: tuple(t) for stage, t in result[when].items()}
    result["import"] = tuple(result["import"])
    return result


#: run by `disk_hit` in fresh processes sharing one cache folder: `import compiler`, then
#: compile() of the matmul (a miss that fills the disk cache in the first process, a hit
#: in the later ones), the kernel checked
_DISK_PROBE = """
import json, sys, time
wall = time.perf_counter()
import compiler
imported = time.perf_counter() - wall
from compiler.jit.disk_cache import disk_cache
from tools.bench.matmul import matmul_source
m, n, k = json.loads(sys.argv[1])
source = matmul_source(m, n, k)
wall = time.perf_counter()
kernel = compiler.compile(source, pipeline="default")
seconds = time.perf_counter() - wall
import numpy as np
from compiler.measure.runner import error_bound
rng = np.random.default_rng(0)
a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
want = a.astype(np.float64) @ b
ok = float(np.abs(kernel(a, b) - want).max()) <= error_bound(k, np.dtype(np.float32), float(np.abs(want).max()))
print(json.dumps({"import": imported, "compile": seconds, "stats": dict(disk_cache.stats), "ok": ok}))
"""


def disk_hit(shape: Shape = (1024, 1024, 1024), hits: int = 5) -> dict:
    """compile() of the default pipeline's matmul of `shape` in a fresh process with an
    empty disk cache ("miss": it compiles and stores), then in `hits` more processes that
    find it there; the wall seconds of `import compiler` and of compile() in each, and
    whether every kernel checked against numpy."""
    import json
    import os
    import subprocess
    import sys
    import tempfile

    from passes.support.diagnostics import LoomError

    runs = []
    with tempfile.TemporaryDirectory(prefix="loom-bench-cache-") as folder:
        environment = {**os.environ, "LOOM_CACHE_DIR": folder}
        environment.pop("LOOM_CACHE_MAX_BYTES", None)
        for _ in range(1 + hits):
            done = subprocess.run([sys.executable, "-c", _DISK_PROBE, json.dumps(list(shape))], capture_output=True,
                                  text=True, env=environment, check=False)
            if done.returncode != 0:
                last = next((line for line in reversed(done.stderr.splitlines()) if line.strip()), "")
                raise LoomError(f"the disk cache probe failed (exit status {done.returncode}): {last.strip()}")
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {"shape": list(shape), "miss": runs[0], "hits": runs[1:],
            "ok": all(r["ok"] for r in runs) and all(r["stats"].get("hit") for r in runs[1:])}


def markdown_disk_hit(result: dict) -> str:
    """One line per process: import and compile() wall milliseconds, and what the cache did."""
    hits = sorted(r["compile"] for r in result["hits"])
    label = "x".join(map(str, result["shape"]))
    out = [f"disk cache, matmul {label} (default pipeline), each a fresh process:",
           "| process | import compiler (ms) | compile() (ms) | disk cache |", "|---|---:|---:|---|"]
    for i, r in enumerate([result["miss"], *result["hits"]]):
        what = ", ".join(f"{k} {v}" for k, v in sorted(r["stats"].items()))
        out.append(f"| {'first' if i == 0 else f'then {i}'} | {r['import'] * 1e3:.1f} | {r['compile'] * 1e3:.1f} | "
                   f"{what}{'' if r['ok'] else ', MISMATCH'} |")
    out.append(f"\na hit: median {hits[len(hits) // 2] * 1e3:.1f} ms, best {hits[0] * 1e3:.1f} ms beyond import")
    return "\n".join(out)


def run_compile(
    examples: Sequence[tuple[str, str]] = (), *, chains: Sequence[int] = CHAIN_LENGTHS, pipeline: str = "default",
    matmul: Shape | None = (1024, 1024, 1024), on_row: Callable[[CompileRow], None] | None = None,
) -> tuple[list[CompileRow], tuple[float, float] | None]:
    """Compile time by stage: each example (name, source) and each chain of `chains` ops
    with `pipeline`, in this process after a warm-up compile; then, in a fresh process,
    the default pipeline's matmul of shape `matmul` cold and warm. Every kernel is
    checked (the one compile timed). Returns the rows and the (CPU, wall) seconds of
    `import compiler` in the fresh process (None without `matmul`)."""
    compile_fresh(chain_source(2), pipeline)  # lazy imports and LLVM's set-up: not the rows' cost
    rows: list[CompileRow] = []

    def add(row: CompileRow) -> None:
        rows.append(row)
        if on_row:
            on_row(row)

    for name, source in examples:
        add(checked_compile(name, source, pipeline))
    for n in chains:
        add(checked_compile(f"chain of {n} adds", chain_source(n), pipeline))
    if matmul is None:
        return rows, None
    probe = cold_compile(matmul)
    label = f"matmul {shape_label(matmul)}"
    for when in ("cold", "warm"):
        add(CompileRow(f"{label} ({when})", "default", probe[when], probe["compile_seconds"], probe["max_err"],
                       probe["bound"]))
    return rows, probe["import"]


def _stage_names(rows: list[CompileRow]) -> list[str]:
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row.stages))
    return list(names)


def markdown_compile(rows: list[CompileRow], imported: tuple[float, float] | None = None) -> str:
    """Stages down, kernels across: CPU seconds (the wall seconds of the total too: on a
    shared machine they can differ)."""
    out = ["| stage (CPU s) | " + " | ".join(r.name for r in rows) + " |",
           "|---|" + "---:|" * len(rows)]
    for stage in _stage_names(rows):
        out.append(f"| {stage} | " + " | ".join(_fmt(r.stages[stage][0], ".3f") if stage in r.stages else "-"
                                               for r in rows) + " |")
    out.append("| **total CPU** | " + " | ".join(f"**{r.cpu:.3f}**" for r in rows) + " |")
    out.append("| total wall | " + " | ".join(f"{r.wall:.3f}" for r in rows) + " |")
    out.append("| compile() wall | " + " | ".join(f"{r.compile_seconds:.3f}" for r in rows) + " |")
    out.append("| check | " + " | ".join("ok" if r.ok else "MISMATCH" for r in rows) + " |")
    if imported is not None:
        out.append(f"\nimport compiler (a fresh process): {imported[1]:.3f} s wall, {imported[0]:.3f} s CPU")
    return "\n".join(out)


def compile_json(rows: list[CompileRow], imported: tuple[float, float] | None = None) -> dict:
    return {
        "import": None if imported is None else {"cpu": imported[0], "wall": imported[1]},
        "rows": [{"name": r.name, "pipeline": r.pipeline,
                  "stages": {s: {"cpu": c, "wall": w} for s, (c, w) in r.stages.items()},
                  "cpu": r.cpu, "wall": r.wall, "compile_seconds": r.compile_seconds,
                  "max_err": r.max_err, "bound": r.bound, "ok": r.ok} for r in rows],
    }


# --------------------------------------------------------------------------- plot

MATPLOTLIB_MISSING = "--plot needs matplotlib, which is not installed: pip install 'loomir[bench]'"


class MissingMatplotlib(RuntimeError):
    pass


def require_matplotlib() -> None:
    """Raise MissingMatplotlib (with the install hint) unless matplotlib imports."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise MissingMatplotlib(MATPLOTLIB_MISSING) from None


def plot_shapes(rows: list[Measurement], path, *, title: str = "") -> None:
    """A PNG bar chart of GFLOP/s per shape: Loom beside numpy (and torch), the loom/numpy
    ratio above each group."""
    series = [("Loom", [r.gflops for r in rows]), ("numpy", [r.numpy_gflops for r in rows])]
    if any(r.torch_gflops is not None for r in rows):
        series.append(("torch", [r.torch_gflops or 0.0 for r in rows]))
    bar_chart(path, [shape_label(r.shape) for r in rows], series, [(f"{r.ratio:.2f}x", r.ok) for r in rows],
              xlabel="shape M×N×K (C = A[M,K] @ B[K,N]); above each group: loom/numpy speed",
              threads=max(r.threads for r in rows), title=title)


def bar_chart(path, labels: list[str], series: list[tuple[str, list[float]]], notes: list[tuple[str, bool]], *,
              xlabel: str, threads: int, title: str = "") -> None:
    """A PNG bar chart of GFLOP/s on `threads` threads: one group of bars per label, one
    bar per series, each group's note (text, ok) above it (red with MISMATCH when not
    ok). Drawn with the Agg canvas (no display, no pyplot state)."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(7.0, 1.0 + 0.9 * len(labels)), 4.8), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    width = 0.8 / len(series)
    x = np.arange(len(labels))
    for i, (name, values) in enumerate(series):
        ax.bar(x + (i - (len(series) - 1) / 2) * width, values, width, label=name)
    top = max([max(v) for _, v in series] + [1e-9])
    for xi, (text, ok) in zip(x, notes):
        height = max(v[xi] for _, v in series)
        ax.annotate(text + ("" if ok else "\nMISMATCH"), (xi, height + 0.01 * top), ha="center", va="bottom",
                    fontsize=8, color="black" if ok else "red")
    ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"GFLOP/s ({'one thread' if threads == 1 else f'{threads} threads'})")
    ax.set_ylim(0, top * 1.15)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))  # beside the plot: never over a bar's note
    if title:
        ax.set_title(title, fontsize=8)
    fig.savefig(path, dpi=120)


def bench_machine() -> str:
    import platform

    from passes.support.target import machine

    return f"{platform.machine()}, {os.cpu_count()} cores, LLVM host CPU {machine().cpu}"


def peak_figures(threads: int = 1) -> dict[str, float]:
    """The machine's FMA peak in GFLOP/s on `threads` threads, f32 and f64 (compiler/measure/peak.py:
    measured once per machine, then cached), for the tables to quote shares of."""
    from compiler.measure.peak import peak_gflops

    return {dtype: peak_gflops(dtype, threads) for dtype in ("f32", "f64")}


def peak_line(threads: int = 1) -> str:
    """`peak: ...`, the line under a table's machine line."""
    figures = peak_figures(threads)
    return (f"peak: {figures['f32']:.1f} GFLOP/s f32, {figures['f64']:.1f} f64 (vector FMA, {threads} "
            f"thread{'s' * (threads != 1)}; measured once per machine, compiler/measure/peak.py)")


# --------------------------------------------------------------------------- epilogue fusion

#: `loom-bench --fusion`: the dense layer of issue 12's target, relu(x @ w + b) at
#: "128x768x3072", as M x N x K (this project's shape notation: K = 3072) and as a
#: transformer's feed-forward layer reads it (x 128x768 @ w 768x3072: N = 3072, K = 768)
FUSION_DENSE: list[Shape] = [(128, 768, 3072), (128, 3072, 768)]
#: and conv2d + bias + relu on these layers of tools/bench/conv.py
FUSION_CONVS = ["3x3 C64 56x56", "3x3 C128 28x28", "1x1 C256 14x14", "3x3 C3 32x32 N32"]


@dataclass
class FusionRow:
    """One kernel with an epilogue: Loom fused (`default`), unfused (`loom-default{skip=fuse}`)
    and the producer alone (the matmul or conv2d with no epilogue: what fusion tends to),
    numpy's expression and product alone for the dense layer, interleaved, by rounds."""

    name: str
    flops: float  # the matmul's or conv2d's
    fused: float
    unfused: float
    alone: float
    numpy: float | None
    numpy_alone: float | None
    #: per round: unfused / fused and numpy / fused seconds (above 1, fusion wins)
    over_unfused: tuple[float, ...]
    over_numpy: tuple[float, ...]
    max_err: float
    bound: float
    remark: str  # loom-fuse-epilogue's remark (what was fused)

    def gflops(self, seconds: float | None) -> float | None:
        return None if seconds is None else self.flops / seconds / 1e9

    @property
    def ok(self) -> bool:
        return bool(self.max_err <= self.bound) and "] fused" in self.remark


def dense_epilogue_source(m: int, n: int, k: int) -> tuple[str, str]:
    """`@dense`: relu(x @ w + b), b over the rows; and `@matmul`, x @ w alone."""
    tx, tw, ty_ = (f"tensor<{r}x{c}xf32>" for r, c in ((m, k), (k, n), (m, n)))
    dense = (f"func.func @dense(%x: {tx}, %w: {tw}, %b: tensor<{n}xf32>) -> {ty_} {{\n"
             f"  %c = loom.matmul %x, %w : ({tx}, {tw}) -> {ty_}\n"
             f"  %s = loom.add %c, %b : ({ty_}, tensor<{n}xf32>) -> {ty_}\n"
             f"  %r = loom.relu %s : {ty_}\n  func.return %r : {ty_}\n}}\n")
    return dense, matmul_source(m, n, k)


def conv_epilogue_source(layer, layout: str) -> tuple[str, str]:
    """conv2d + a bias per output channel (F x 1 x 1 in NCHW, F in NHWC) + relu; and the
    conv2d alone."""
    from tools.bench.conv import conv_source, layer_shapes

    alone = conv_source(layer, layout)
    y = layer_shapes(layer, layout)[2]
    f = layer[4]
    ty_, tb = f"tensor<{'x'.join(map(str, y))}xf32>", f"tensor<{f}x1x1xf32>" if layout == "nchw" else f"tensor<{f}xf32>"
    head, _, _ = alone.partition("  func.return")
    head = head.replace(") -> ", f", %b: {tb}) -> ", 1)
    return (head + f"  %s = loom.add %y, %b : ({ty_}, {tb}) -> {ty_}\n  %r = loom.relu %s : {ty_}\n"
            f"  func.return %r : {ty_}\n}}\n", alone)


def _fusion_row(name: str, source: str, alone_source: str, args: list[np.ndarray], alone_args: list[np.ndarray],
                flops: float, k: int, numpy_fns: list | None, *, budget: float, repeat: int, rounds: int) -> FusionRow:
    from compiler.driver import reference

    fused = compile(source, pipeline="default", num_threads=1, remarks=True, cache=False)
    unfused = compile(source, pipeline="loom-default{skip=fuse}", num_threads=1, cache=False)
    alone = compile(alone_source, pipeline="default", num_threads=1, cache=False)
    want = reference(source, *args)
    got = fused(*args)
    err = max(float(np.abs(got - want).max()), float(np.abs(unfused(*args) - want).max()))
    bound = error_bound(k, np.dtype(np.float32), float(np.abs(want).max()))
    fns = [lambda: fused(*args), lambda: unfused(*args), lambda: alone(*alone_args), *(numpy_fns or [])]
    for f in fns[1:]:
        f()
    timing = timed_rounds(fns, budget=budget, at_most=repeat, rounds=rounds)
    remark = next((r for r in fused.remarks if "[loom-fuse-epilogue]" in r), "")
    return FusionRow(name, flops, timing.median(0), timing.median(1), timing.median(2),
                     timing.median(3) if numpy_fns else None, timing.median(4) if numpy_fns else None,
                     timing.ratios(1), timing.ratios(3) if numpy_fns else (), err, bound, remark)


def run_fusion(dense: Sequence[Shape] = FUSION_DENSE, convs: Sequence[str] = FUSION_CONVS,
               layouts: Sequence[str] = ("nchw", "nhwc"), *, budget: float = 2.0, repeat: int = 20, rounds: int = 5,
               seed: int = 0, on_row: Callable[[FusionRow], None] | None = None) -> list[FusionRow]:
    """Each dense shape beside numpy's `np.maximum(x @ w + b, 0)`, and each conv2d layer in
    each layout, fused against unfused (one thread, interleaved, medians of `rounds`)."""
    from tools.bench.conv import LAYERS, layer_shapes

    rows = []
    rng = np.random.default_rng(seed)
    for m, n, k in dense:
        x, w = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        source, alone = dense_epilogue_source(m, n, k)
        numpy_fns = [lambda: np.maximum(x @ w + b, 0), lambda: x @ w]
        rows.append(_fusion_row(f"relu(x @ w + b) {m}x{n}x{k}", source, alone, [x, w, b], [x, w], 2.0 * m * n * k,
                                k, numpy_fns, budget=budget, repeat=repeat, rounds=rounds))
        if on_row:
            on_row(rows[-1])
    for name in convs:
        layer = LAYERS["all"][name]
        for layout in layouts:
            x_shape, w_shape, y_shape = layer_shapes(layer, layout)
            x = rng.standard_normal(x_shape).astype(np.float32)
            w = rng.standard_normal(w_shape).astype(np.float32)
            f = layer[4]
            b = rng.standard_normal((f, 1, 1) if layout == "nchw" else (f,)).astype(np.float32)
            source, alone = conv_epilogue_source(layer, layout)
            c, r, s = layer[1], layer[5], layer[6]
            flops = 2.0 * float(np.prod(y_shape)) * c * r * s
            rows.append(_fusion_row(f"conv2d {name} {layout.upper()} + bias + relu", source, alone, [x, w, b], [x, w],
                                    flops, c * r * s, None, budget=budget, repeat=repeat, rounds=rounds))
            if on_row:
                on_row(rows[-1])
    return rows


def markdown_fusion(rows: list[FusionRow]) -> str:
    """GFLOP/s of the producer's flops (the matmul's or conv2d's): fused, unfused, the
    producer alone, numpy's expression and product; fused over unfused and over numpy's
    expression (medians of the rounds' ratios, with their range)."""
    out = ["| kernel | fused GFLOP/s | unfused GFLOP/s | fused/unfused | alone GFLOP/s | numpy expr GFLOP/s "
           "| fused/numpy expr | numpy x@w GFLOP/s | check |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        def spread(ratios: tuple[float, ...]) -> str:
            return f"{np.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})" if ratios else "-"

        out.append(f"| {r.name} | {r.gflops(r.fused):.1f} | {r.gflops(r.unfused):.1f} | {spread(r.over_unfused)} "
                   f"| {r.gflops(r.alone):.1f} | {_fmt(r.gflops(r.numpy), '.1f')} | {spread(r.over_numpy)} "
                   f"| {_fmt(r.gflops(r.numpy_alone), '.1f')} | {'ok' if r.ok else 'MISMATCH or not fused'} |")
    return "\n".join(out)


def fusion_json(rows: list[FusionRow]) -> list[dict]:
    return [{**asdict(r), "fused_gflops": r.gflops(r.fused), "unfused_gflops": r.gflops(r.unfused),
             "alone_gflops": r.gflops(r.alone), "numpy_gflops": r.gflops(r.numpy),
             "numpy_alone_gflops": r.gflops(r.numpy_alone), "ok": r.ok} for r in rows]

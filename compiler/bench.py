"""The staged matmul benchmark behind `loom-bench --stages`.

It retells the classic report on CPU matmul optimizations with Loom's passes: each stage
is a pipeline, checked against numpy, timed beside numpy in the same process (runs
interleaved, medians), its loop nest printable.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from itertools import groupby

import numpy as np

from compiler.driver import compile
from compiler.runner import error_bound, median_times


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


def matmul_source(n: int, dtype: str = "f32") -> str:
    t = f"tensor<{n}x{n}x{dtype}>"
    return (f"func.func @matmul(%a: {t}, %b: {t}) -> {t} {{\n"
            f"  %c = loom.matmul %a, %b : ({t}, {t}) -> {t}\n"
            f"  func.return %c : {t}\n}}\n")


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


def repeats_for(seconds: float, budget: float, at_most: int) -> int:
    """How many timed runs fit the per-stage budget (at least 3 for a median)."""
    return max(3, min(at_most, int(budget / max(seconds, 1e-6))))


def run_stages(
    sizes=SIZES, stages=STAGES, *, repeat: int = 10, budget: float = 2.0, seed: int = 0,
    on_row: Callable[[Row, dict], None] | None = None,
) -> list[Row]:
    """Every stage at every size; `on_row(row, kernel_info)` is called as rows come."""
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
            kernel = compile(matmul_source(n), pipeline=pipeline)
            compile_seconds = time.perf_counter() - t0
            got = kernel(a, b)
            err = float(np.abs(got - want).max())
            t0 = time.perf_counter()
            kernel(a, b)
            reps = repeats_for(time.perf_counter() - t0, budget, repeat)
            seconds, numpy_seconds = median_times([lambda: kernel(a, b), lambda: np.matmul(a, b)], reps)
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

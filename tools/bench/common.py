"""What loom-bench's modes share: the matmul's source text and shape labels, a compile that
is never a cache hit, the machine and its FMA peak (the lines over every table, and
`--peak`), and the bar chart that `--plot` draws."""

from __future__ import annotations

import json
import os
import platform
import sys
import time

import numpy as np

from compiler.driver import compile
from compiler.measure.peak import DTYPES, ITERATIONS, RUNS, cache_path, dot_path, peak_gflops, remeasure, vector_shape
from passes.support.target import machine

Shape = tuple[int, int, int]  # (M, N, K): C[M, N] = A[M, K] @ B[K, N]


def torch_from_numpy(torch, a: np.ndarray):
    """A tensor of `torch` (the module, imported by the caller: torch is optional) sharing
    `a`'s memory; a bfloat16 array (ml_dtypes, which `torch.from_numpy` does not take)
    through its bits."""
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def shape_label(shape: Shape) -> str:
    """(M, N, K) -> `MxNxK`, what `loom-bench --shapes-list` reads."""
    return "x".join(map(str, shape))


def matmul_source(m: int, n: int | None = None, k: int | None = None, *, dtype: str = "f32",
                  types: tuple[str, str, str] | None = None, transposed: bool = False) -> str:
    """`@matmul`: C[M, N] = A[M, K] @ B[K, N]; `matmul_source(n)` is the square n x n x n.
    The elements are `dtype`, or A's, B's and C's `types` (`("ui8", "i8", "i32")`).
    `transposed`: the function takes W[N, K] and multiplies by its transpose (`x @ w.T`, a
    linear layer's weight as torch stores it: B a view, never copied by the caller)."""
    n = m if n is None else n
    k = m if k is None else k
    a, b, c = types or (dtype, dtype, dtype)
    ta, tb, tc, tw = (f"tensor<{r}x{q}x{t}>" for r, q, t in ((m, k, a), (k, n, b), (m, n, c), (n, k, b)))
    if transposed:
        return (f"func.func @matmul(%a: {ta}, %w: {tw}) -> {tc} {{\n"
                f"  %b = loom.transpose %w {{perm = array<i64: 1, 0>}} : {tw} -> {tb}\n"
                f"  %c = loom.matmul %a, %b : ({ta}, {tb}) -> {tc}\n"
                f"  func.return %c : {tc}\n}}\n")
    return (f"func.func @matmul(%a: {ta}, %b: {tb}) -> {tc} {{\n"
            f"  %c = loom.matmul %a, %b : ({ta}, {tb}) -> {tc}\n"
            f"  func.return %c : {tc}\n}}\n")


def compile_fresh(source: str, pipeline: str, num_threads: int | None = None, remarks: bool = False):
    """compile() and its wall time, a real compile: a compile asked for its timings is
    never served from the cache."""
    t0 = time.perf_counter()
    kernel = compile(source, pipeline=pipeline, num_threads=num_threads, timings={}, remarks=remarks)
    return kernel, time.perf_counter() - t0


def cell(x: float | None, spec: str) -> str:
    """A table's cell: `x` formatted, or "-" where there is no figure."""
    return "-" if x is None else format(x, spec)


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


def write_plot(path: str, draw) -> bool:
    """Run `draw`, which writes the plot to `path`; False (with the error said) when it cannot."""
    try:
        draw()
    except OSError as e:
        print(f"loom-bench: error: cannot write the plot {path}: {e.strerror or e}", file=sys.stderr)
        return False
    print(f"plot: {path}", file=sys.stderr)
    return True


# --------------------------------------------------------------------------- the machine

def bench_machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, LLVM host CPU {machine().cpu}"


def peak_figures(threads: int = 1) -> dict[str, float]:
    """The machine's FMA peak in GFLOP/s on `threads` threads, f32 and f64 (compiler/measure/peak.py:
    measured once per machine, then cached), for the tables to quote shares of."""
    return {dtype: peak_gflops(dtype, threads) for dtype in ("f32", "f64")}


def peak_line(threads: int = 1) -> str:
    """`peak: ...`, the line under a table's machine line."""
    figures = peak_figures(threads)
    return (f"peak: {figures['f32']:.1f} GFLOP/s f32, {figures['f64']:.1f} f64 (vector FMA, {threads} "
            f"thread{'s' * (threads != 1)}; measured once per machine, compiler/measure/peak.py)")


def peak_mode(args) -> int:
    """`loom-bench --peak`: measure the peak afresh, f32, f64, bf16 and int8 (each on the
    instruction `dot_path` names for this machine), on one thread and on --threads; the cache
    keeps the best figure known."""
    counts = sorted({1, args.threads})
    rows = {t: {dtype: remeasure(dtype, t) for dtype in DTYPES} for t in counts}
    machine = bench_machine()
    paths = {dtype: dot_path(dtype) for dtype in DTYPES}
    if args.json:
        figures = []
        for t, row in rows.items():
            figure: dict[str, float] = {"threads": t}
            for dtype, (fresh, best) in row.items():
                figure.update({dtype: fresh, f"{dtype}_best": best})
            figures.append(figure)
        print(json.dumps({"machine": machine, "cache": str(cache_path()), "peak": figures,
                          "instructions": {dtype: path.describe() for dtype, path in paths.items()}}, indent=1))
        return 0
    lanes32, chains = vector_shape("f32")
    print(f"machine: {machine}\npeak: {chains} independent chains of vector multiply-adds ({lanes32} f32 or i32 "
          f"lanes, {lanes32 // 2} f64), {ITERATIONS:,} iterations per thread, best of {RUNS} runs "
          "(compiler/measure/peak.py)")
    for dtype, path in paths.items():
        print(f"  {dtype}: {path.describe()}, {path.ops_per_lane} operations per lane")
    print("\n| threads | f32 GFLOP/s | f64 GFLOP/s | bf16 GFLOP/s | int8 GOP/s |\n|---:|---:|---:|---:|---:|")
    for t, row in rows.items():
        cells = [f"{fresh:.1f}" + (f" (best known {best:.1f})" if best > fresh * 1.005 else "")
                 for fresh, best in row.values()]
        print(f"| {t} | {' | '.join(cells)} |")
    print(f"\ncached (the best known) in {cache_path()}")
    return 0

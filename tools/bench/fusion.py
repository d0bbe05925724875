"""`loom-bench --fusion`: epilogue fusion (loom-fuse-epilogue, the default pipeline's step
`fuse`) timed, one thread: a dense layer relu(x @ w + b) beside numpy's expression, and
conv2d + bias + relu on layers of tools/bench/conv.py in NCHW and NHWC; each fused
(`default`) against unfused (`loom-default{skip=fuse}`) and the producer alone,
interleaved, by rounds."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from compiler.driver import compile, reference
from compiler.measure.runner import error_bound, timed_rounds
from tools.bench.common import Shape, bench_machine, cell, matmul_source, peak_line
from tools.bench.conv import LAYERS, conv_source, layer_shapes

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
                   f"| {r.gflops(r.alone):.1f} | {cell(r.gflops(r.numpy), '.1f')} | {spread(r.over_numpy)} "
                   f"| {cell(r.gflops(r.numpy_alone), '.1f')} | {'ok' if r.ok else 'MISMATCH or not fused'} |")
    return "\n".join(out)


def fusion_json(rows: list[FusionRow]) -> list[dict]:
    return [{**asdict(r), "fused_gflops": r.gflops(r.fused), "unfused_gflops": r.gflops(r.unfused),
             "alone_gflops": r.gflops(r.alone), "numpy_gflops": r.gflops(r.numpy),
             "numpy_alone_gflops": r.gflops(r.numpy_alone), "ok": r.ok} for r in rows]


def fusion_mode(args, blas: str) -> int:
    """`loom-bench --fusion`: the table."""

    def progress(r) -> None:
        print(f"  {r.name:<44} fused {r.gflops(r.fused):6.1f}  unfused {r.gflops(r.unfused):6.1f}  alone "
              f"{r.gflops(r.alone):6.1f} GFLOP/s{'' if r.ok else '  MISMATCH or not fused'}", file=sys.stderr)

    rows = run_fusion(FUSION_DENSE, FUSION_CONVS, budget=args.budget, repeat=args.repeat, rounds=args.rounds,
                      on_row=None if args.json else progress)
    machine = bench_machine()
    if args.json:
        print(json.dumps({"machine": machine, "blas": blas, "rows": fusion_json(rows)}, indent=1))
    else:
        print(f"machine: {machine}\n{peak_line(1)}\n{blas}\n\nepilogue fusion, one thread, f32, "
              f"{args.rounds} round{'s' * (args.rounds != 1)} (GFLOP/s of the matmul's or conv2d's flops)\n")
        print(markdown_fusion(rows))
    return 0 if all(r.ok for r in rows) else 1

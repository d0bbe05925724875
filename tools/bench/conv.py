"""The conv2d benchmark behind `loom-bench --conv`: Loom's `default` pipeline on
ResNet-like layers beside torch (`torch.nn.functional.conv2d`, oneDNN; when installed)
and beside numpy doing the same im2col + matmul by hand (the patch matrix copied with
`sliding_window_view`, then `np.matmul` with OpenBLAS), on the same threads, in one
process, interleaved, medians of rounds. Every Loom kernel is checked against the float64
reference within `error_bound` of its reduction length C*R*S. In NHWC (`layout="nhwc"`)
Loom gets NHWC input and HWCF filter, torch the same data as channels_last tensors (its
filter in its own channels_last order, F x R x S x C), numpy the NHWC patch matrix.
The table names the strategy the default pipeline chose per layer (its remark).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from compiler.measure.runner import SETTLE, error_bound, timed_rounds
from compiler.numpy_reference import conv2d_nchw, conv2d_nhwc
from dialects.loom import conv2d_output_hw
from tools.bench import peers as anchors
from tools.bench.common import bar_chart, bench_machine, cell, compile_fresh, peak_line, torch_from_numpy, write_plot

#: (n, c, h, w, f, r, s, strides, padding, dilations)
Layer = tuple[int, int, int, int, int, int, int, tuple[int, int], tuple[int, int], tuple[int, int]]

#: the layers of issue 11's targets: ResNet's 3x3 stages, its stem (batch 8), a 1x1
RESNET: dict[str, Layer] = {
    "3x3 C64 56x56": (1, 64, 56, 56, 64, 3, 3, (1, 1), (1, 1), (1, 1)),
    "3x3 C128 28x28": (1, 128, 28, 28, 128, 3, 3, (1, 1), (1, 1), (1, 1)),
    "7x7/2 stem N8": (8, 3, 224, 224, 64, 7, 7, (2, 2), (3, 3), (1, 1)),
    "1x1 C256 14x14": (1, 256, 14, 14, 256, 1, 1, (1, 1), (0, 0), (1, 1)),
}
#: the rest of the family: a stride-2 3x3, a 512-channel 7x7 map, a dilated 5x5, CIFAR
FAMILY: dict[str, Layer] = {
    "3x3/2 C128 56x56": (1, 128, 56, 56, 128, 3, 3, (2, 2), (1, 1), (1, 1)),
    "3x3 C512 7x7": (1, 512, 7, 7, 512, 3, 3, (1, 1), (1, 1), (1, 1)),
    "5x5 dil2 C64 28x28": (1, 64, 28, 28, 64, 5, 5, (1, 1), (4, 4), (2, 2)),
    "3x3 C3 32x32 N32": (32, 3, 32, 32, 16, 3, 3, (1, 1), (1, 1), (1, 1)),
}
LAYERS = {"resnet": RESNET, "family": FAMILY, "all": {**RESNET, **FAMILY}}


def layer_shapes(layer: Layer, layout: str = "nchw") -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The input's, the filter's and the output's shapes in `layout`."""
    n, c, h, w, f, r, s, strides, padding, dilations = layer
    ho, wo = conv2d_output_hw(h, w, r, s, strides, padding, dilations)
    if layout == "nhwc":
        return (n, h, w, c), (r, s, c, f), (n, ho, wo, f)
    return (n, c, h, w), (f, c, r, s), (n, f, ho, wo)


def conv_source(layer: Layer, layout: str = "nchw", types: tuple[str, str, str] = ("f32", "f32", "f32")) -> str:
    """The layer's conv2d function, X, W and Y of `types`."""
    (sh, sw), (ph, pw), (dh, dw) = layer[7:]
    tx, tw, ty = (f"tensor<{'x'.join(map(str, d))}x{t}>" for d, t in zip(layer_shapes(layer, layout), types))
    attrs = ('layout = "nhwc", ' if layout == "nhwc" else "") + (
        f"strides = array<i64: {sh}, {sw}>, padding = array<i64: {ph}, {pw}>, dilations = array<i64: {dh}, {dw}>")
    return (f"func.func @conv(%x: {tx}, %w: {tw}) -> {ty} {{\n"
            f"  %y = loom.conv2d %x, %w {{{attrs}}} : ({tx}, {tw}) -> {ty}\n"
            f"  func.return %y : {ty}\n}}\n")


def numpy_im2col(x: np.ndarray, w: np.ndarray, strides, padding, dilations) -> np.ndarray:
    """Loom's algorithm by hand in numpy: the patch matrix N x (C*R*S) x (Ho*Wo) copied
    from the padded input's windows, then W (F x C*R*S) @ it per image, NCHW out."""
    n, c, _, _ = x.shape
    f, _, r, s = w.shape
    (sh, sw), (ph, pw), (dh, dw) = strides, padding, dilations
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw))) if ph or pw else x
    windows = np.lib.stride_tricks.sliding_window_view(xp, ((r - 1) * dh + 1, (s - 1) * dw + 1), axis=(2, 3))
    windows = windows[:, :, ::sh, ::sw, ::dh, ::dw]  # n, c, ho, wo, r, s
    ho, wo = windows.shape[2:4]
    col = np.ascontiguousarray(windows.transpose(0, 1, 4, 5, 2, 3)).reshape(n, c * r * s, ho * wo)
    return np.matmul(w.reshape(f, c * r * s), col).reshape(n, f, ho, wo)


def numpy_im2col_nhwc(x: np.ndarray, w: np.ndarray, strides, padding, dilations) -> np.ndarray:
    """The same in NHWC: the patch matrix (N*Ho*Wo) x (R*S*C), then @ W (R*S*C x F)."""
    n, _, _, c = x.shape
    r, s, _, f = w.shape
    (sh, sw), (ph, pw), (dh, dw) = strides, padding, dilations
    xp = np.pad(x, ((0, 0), (ph, ph), (pw, pw), (0, 0))) if ph or pw else x
    windows = np.lib.stride_tricks.sliding_window_view(xp, ((r - 1) * dh + 1, (s - 1) * dw + 1), axis=(1, 2))
    windows = windows[:, ::sh, ::sw, :, ::dh, ::dw]  # n, ho, wo, c, r, s
    ho, wo = windows.shape[1:3]
    col = np.ascontiguousarray(windows.transpose(0, 1, 2, 4, 5, 3)).reshape(n * ho * wo, r * s * c)
    return np.matmul(col, w.reshape(r * s * c, f)).reshape(n, ho, wo, f)


def torch_conv(x: np.ndarray, w: np.ndarray, layer: Layer, threads: int,
               layout: str = "nchw") -> Callable[[], object] | None:
    """`torch.nn.functional.conv2d` on tensors sharing x's and w's memory (NHWC: x's, as
    a channels_last tensor, and the filter copied once into torch's channels_last order),
    on `threads` threads; None when torch is not installed. f32 or bfloat16 arrays."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(threads)
    if layout == "nhwc":
        tx = torch_from_numpy(torch, x).permute(0, 3, 1, 2)
        tw = torch_from_numpy(torch, np.ascontiguousarray(w.transpose(3, 0, 1, 2))).permute(0, 3, 1, 2)
    else:
        tx, tw = torch_from_numpy(torch, x), torch_from_numpy(torch, w)
    strides, padding, dilations = layer[7:]
    return lambda: torch.nn.functional.conv2d(tx, tw, stride=strides, padding=padding, dilation=dilations)


@dataclass(frozen=True)
class ConvMeasurement:
    name: str
    layer: Layer
    flops: float
    seconds: float
    torch_seconds: float | None
    numpy_seconds: float
    #: each round's loom/torch and loom/numpy (speed ratios: above 1, Loom is faster)
    torch_ratios: tuple[float, ...]
    numpy_ratios: tuple[float, ...]
    max_err: float
    bound: float
    compile_seconds: float
    threads: int
    layout: str = "nchw"
    #: the strategy the default pipeline chose ("direct", "im2col"; its remark)
    strategy: str = ""
    #: ONNX Runtime's and OpenVINO's seconds and max errors, by name (`--peers`)
    peers: dict[str, float] = field(default_factory=dict)
    peer_errors: dict[str, float] = field(default_factory=dict)

    def gflops(self, seconds: float | None) -> float | None:
        return None if seconds is None else self.flops / seconds / 1e9

    @property
    def ok(self) -> bool:
        return bool(self.max_err <= self.bound)


def measure_conv(name: str, layer: Layer, *, threads: int = 1, budget: float = 2.0, repeat: int = 10,
                 rounds: int = 1, seed: int = 0, layout: str = "nchw", with_runtimes: bool = False) -> ConvMeasurement:
    n, c, h, w, f, r, s, strides, padding, dilations = layer
    rng = np.random.default_rng(seed)
    x_shape, w_shape, _ = layer_shapes(layer, layout)
    x = rng.standard_normal(x_shape).astype(np.float32)
    wt = rng.standard_normal(w_shape).astype(np.float32)
    kernel, compile_seconds = compile_fresh(conv_source(layer, layout), "default", threads, remarks=True)
    reference, im2col = (conv2d_nhwc, numpy_im2col_nhwc) if layout == "nhwc" else (conv2d_nchw, numpy_im2col)
    want = reference(x.astype(np.float64), wt.astype(np.float64), strides, padding, dilations)
    err = float(np.abs(kernel(x, wt) - want).max())
    bound = error_bound(c * r * s, np.dtype(np.float32), float(np.abs(want).max()))
    fns = [lambda: kernel(x, wt), lambda: im2col(x, wt, strides, padding, dilations)]
    torch = torch_conv(x, wt, layer, threads, layout)
    if torch is not None:
        fns.append(torch)
    runtimes = (anchors.kernel_peers("conv2d", *anchors.nchw(x, wt, layout), "f32", threads, conv=layer[7:])
                if with_runtimes else [])
    first_runtime = len(fns)
    fns += [p.run for p in runtimes]
    want_nchw = want.transpose(0, 3, 1, 2) if layout == "nhwc" else want
    for fn in fns[1:]:
        fn()
    timing = timed_rounds(fns, budget=budget, at_most=repeat, rounds=rounds, settle=SETTLE if threads > 1 else 0.0)
    ho, wo = conv2d_output_hw(h, w, r, s, strides, padding, dilations)
    return ConvMeasurement(
        name, layer, 2.0 * n * f * ho * wo * c * r * s, timing.median(0),
        timing.median(2) if torch is not None else None, timing.median(1),
        timing.ratios(2) if torch is not None else (), timing.ratios(1), err, bound, compile_seconds, threads,
        layout, chosen_strategy(kernel.remarks),
        {p.name: timing.median(first_runtime + i) for i, p in enumerate(runtimes)},
        {p.name: p.check(want_nchw) for p in runtimes})


def chosen_strategy(remarks: Sequence[str]) -> str:
    """The conv2d strategy named by loom-default's remark ("?" if none says)."""
    found = re.search(r"\[loom-default\] conv2d .*?: (direct|im2col): ", "\n".join(remarks))
    return found.group(1) if found else "?"


def run_conv(layers: dict[str, Layer], *, threads: int = 1, budget: float = 2.0, repeat: int = 10, rounds: int = 1,
             layout: str = "nchw", on_row: Callable[[ConvMeasurement], None] | None = None,
             with_runtimes: bool = False) -> list[ConvMeasurement]:
    rows = []
    for name, layer in layers.items():
        row = measure_conv(name, layer, threads=threads, budget=budget, repeat=repeat, rounds=rounds, layout=layout,
                           with_runtimes=with_runtimes)
        rows.append(row)
        if on_row:
            on_row(row)
    return rows


def _median(values: Sequence[float]) -> float | None:
    return float(np.median(values)) if values else None


def markdown_conv(rows: list[ConvMeasurement]) -> str:
    names = list(dict.fromkeys(name for m in rows for name in m.peers))
    out = ["| layer | N×C×H×W, F×R×S, stride, pad, dil | strategy | Loom GFLOP/s | torch GFLOP/s | loom/torch | "
           "numpy im2col GFLOP/s | loom/numpy |" + "".join(f" {name} GFLOP/s | loom/it |" for name in names)
           + " compile s | check |",
           "|---|---|---|---:|---:|---:|---:|---:|" + "---:|---:|" * len(names) + "---:|---|"]
    for m in rows:
        n, c, h, w, f, r, s, st, pad, dil = m.layer
        shape = f"{n}×{c}×{h}×{w}, {f}×{r}×{s}, {st[0]}, {pad[0]}, {dil[0]}"
        torch_ratio = _median(m.torch_ratios) if m.torch_ratios else (
            None if m.torch_seconds is None else m.torch_seconds / m.seconds)
        numpy_ratio = _median(m.numpy_ratios) or m.numpy_seconds / m.seconds
        out.append(f"| {m.name} | {shape} | {m.strategy} | {cell(m.gflops(m.seconds), '.1f')} | {cell(m.gflops(m.torch_seconds), '.1f')} | "
                   f"{cell(torch_ratio, '.2f')} | {cell(m.gflops(m.numpy_seconds), '.1f')} | {numpy_ratio:.2f} |"
                   + "".join(f" {cell(m.gflops(m.peers.get(n)), '.1f')} |"
                             f" {cell(m.peers[n] / m.seconds if n in m.peers else None, '.2f')} |" for n in names)
                   + f" {m.compile_seconds:.2f} | {'ok' if m.ok else 'MISMATCH'} |")
    return "\n".join(out) + anchors.errors_note({m.name: m.peer_errors for m in rows}, {m.name: m.bound for m in rows})


def conv_json(rows: list[ConvMeasurement]) -> list[dict]:
    return [{"name": m.name, "layer": [list(v) if isinstance(v, tuple) else v for v in m.layer],
             "gflops": m.gflops(m.seconds), "torch_gflops": m.gflops(m.torch_seconds),
             "numpy_im2col_gflops": m.gflops(m.numpy_seconds), "torch_ratios": list(m.torch_ratios),
             "numpy_ratios": list(m.numpy_ratios), "max_err": m.max_err, "bound": m.bound, "ok": m.ok,
             "compile_seconds": m.compile_seconds, "threads": m.threads, "layout": m.layout,
             "strategy": m.strategy,
             "peers": {n: {"seconds": t, "gflops": m.gflops(t), "max_err": m.peer_errors[n]} for n, t in m.peers.items()}}
            for m in rows]


def plot_conv(rows: list[ConvMeasurement], path, *, title: str = "") -> None:
    """A PNG bar chart of GFLOP/s per layer: Loom beside torch and numpy's im2col, each
    group's strategy and loom/torch speed above it."""
    series = [("Loom", [m.gflops(m.seconds) for m in rows]), ("numpy im2col", [m.gflops(m.numpy_seconds) for m in rows])]
    if any(m.torch_seconds is not None for m in rows):
        series.append(("torch", [m.gflops(m.torch_seconds) or 0.0 for m in rows]))
    notes = [(f"{m.strategy}\n{_median(m.torch_ratios):.2f}x" if m.torch_ratios else m.strategy, m.ok) for m in rows]
    bar_chart(path, [m.name for m in rows], series, notes,
              xlabel=f"layer ({rows[0].layout.upper()}); above each group: Loom's strategy, loom/torch speed",
              threads=max(m.threads for m in rows), title=title)


def conv_mode(args, blas: str) -> int:
    """`loom-bench --conv`: the table, and the plot with --plot."""

    def progress(m) -> None:
        torch = "" if m.torch_seconds is None else f", torch {m.gflops(m.torch_seconds):.1f}"
        print(f"  {m.name:<20} {m.strategy:<6} {m.seconds:.4g} s  {m.gflops(m.seconds):7.1f} GFLOP/s  (numpy im2col "
              f"{m.gflops(m.numpy_seconds):.1f}{torch})  compile {m.compile_seconds:.2f} s"
              f"{'' if m.ok else '  MISMATCH'}", file=sys.stderr)

    rows = run_conv(LAYERS[args.layers], threads=args.threads, budget=args.budget, repeat=args.repeat,
                    rounds=args.rounds, layout=args.layout, on_row=None if args.json else progress,
                    with_runtimes=args.peers)
    machine = bench_machine()
    if args.json:
        print(json.dumps({"machine": machine, "blas": blas, "rows": conv_json(rows)}, indent=1))
    else:
        print(f"machine: {machine}\n{peak_line(args.threads)}\n{blas}\n\npipeline: default, "
              f"threads: {args.threads}, f32, {args.layout.upper()}"
              + (f"\n{anchors.header()}" if args.peers else "") + "\n")
        print(markdown_conv(rows))
    if args.plot:
        threads = "one thread" if args.threads == 1 else f"{args.threads} threads"
        if not write_plot(args.plot, lambda: plot_conv(
                rows, args.plot, title=f"Loom (default) vs torch and numpy im2col: f32 conv2d "
                                       f"{args.layout.upper()}, {threads}\n{machine}\n{blas}")):
            return 1
    return 0 if all(r.ok for r in rows) else 1

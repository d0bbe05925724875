"""`loom-bench --shapes --dtype bf16|int8` and `loom-bench --conv --dtype bf16|int8`: Loom's
low-precision matmul or conv2d beside Loom's own f32 kernel of the same shape and torch's
low-precision kernels, in one process.

- bf16: A and B bfloat16 (ml_dtypes), C float32 (products and sums in f32), checked against
  the float64 product of the same bf16 values within the f32 bound of K terms. torch: its
  bf16 `matmul` (oneDNN).
- int8: A uint8, B int8, C int32, exact (bit for bit against the int64 product, wrapped
  to i32). torch: `_int_mm` (s8 x s8 -> i32, on A shifted to s8: the same work) where
  its shape rules allow it (M > 16, K and N multiples of 8), and a dynamically quantized
  `Linear` (f32 in and out, int8 weights: what users of torch quantization run).
- s8: A and B int8 (`_int_mm`'s own types; on VNNI Loom shifts A by +128 and takes 128 x
  B's column sums back out: loom-compensate), the same peers, the same int8 peak.

conv2d (the `--conv` layers): X and W of the type, Y f32 or i32, checked in the same way
(the bound of C*R*S terms); torch: its bf16 `conv2d` (int8: none, torch's quantized
convolution requantizes its output to uint8). `--requantize` (int8) makes each layer the
quantized one that work is (`RequantizedConvProblem`: + i32 bias, requantized to u8 in the
kernel, one fused nest in Loom), beside torch's quantized `Conv2d` and, with `--peers`,
ONNX Runtime's `QLinearConv` and OpenVINO's QDQ graph.

`--transposed`: B is the transpose of W[N, K] (`x @ w.T`), W passed to every kernel (a view
for Loom and torch). `--peers`: ONNX Runtime and OpenVINO too (tools/bench/peers.py), each
checked once, its error reported.

Loom's f32 kernel runs on the same values converted to float32: the ratio bf16/f32 (or
int8/f32) is what the low-precision path gains over f32 on this machine. Operations count
2·M·N·K, a multiply-add being two (GFLOP/s for bf16, GOP/s for int8), and each figure is
quoted as a share of the machine's peak for its type (`loom-bench --peak`).
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from compiler.driver import reference as compiler_reference
from compiler.measure.peak import dot_path, peak_gflops
from compiler.measure.runner import SETTLE, error_bound, timed_rounds
from dialects.dtypes import dtype_named
from compiler.numpy_reference import conv2d_nchw, conv2d_nhwc
from dialects.loom import conv2d_output_hw
from tools.bench.common import Shape, bench_machine, cell, compile_fresh, matmul_source, shape_label, torch_from_numpy
from tools.bench import peers as anchors
from tools.bench.conv import LAYERS, Layer, conv_source, layer_shapes, torch_conv

#: the shapes issue 28's targets name: square, and a transformer's projections
DTYPE_SHAPES: list[Shape] = [(1024, 1024, 1024), (2048, 2048, 2048), (128, 3072, 768), (197, 768, 768)]
#: the element types of A, B and C per `--dtype`
TYPES = {"bf16": ("bf16", "bf16", "f32"), "int8": ("ui8", "i8", "i32"), "s8": ("i8", "i8", "i32")}
#: the peak a type's figures are a share of (s8 x s8 runs on the int8 units: vpdpbusd with
#: A shifted, loom-compensate)
PEAK_TYPES = {"s8": "int8"}


class Problem:
    """A matmul shape's random inputs of `dtype`, the same values in float32 (for Loom's
    f32 kernel), the float64 (bf16) or exact (int8) reference and its bound."""

    #: B is the transpose of W[N, K] (`x @ w.T`): `b` and `b32` hold W, the kernels' argument
    transposed = False

    def __init__(self, shape: Shape, dtype: str, rng: np.random.Generator, transposed: bool = False):
        m, n, k = self.shape = shape
        self.label, self.dtype, self.reduction, self.ops = shape_label(shape), dtype, k, 2.0 * m * n * k
        self.transposed = transposed
        self._draw(rng, (m, k), (n, k) if transposed else (k, n))

    def matrix(self, b: np.ndarray) -> np.ndarray:
        """B of the argument `b` (W's transpose, a view, where `transposed`)."""
        return b.T if self.transposed else b

    def _draw(self, rng: np.random.Generator, a_shape, b_shape) -> None:
        """Random A and B (X and W) of the type, the same values in float32, the reference
        and its bound: bf16 normal, within the f32 bound of the reduction's terms; u8 x s8
        (s8 x s8) over their whole ranges, exact (float64 holds every sum of these sizes
        exactly), wrapped to i32 as Loom's sums wrap."""
        if self.dtype == "bf16":
            bf16 = dtype_named("bfloat16")
            self.a, self.b = rng.standard_normal(a_shape).astype(bf16), rng.standard_normal(b_shape).astype(bf16)
        else:
            self.a = (rng.integers(-128, 128, a_shape).astype(np.int8) if self.dtype == "s8"
                      else rng.integers(0, 256, a_shape).astype(np.uint8))
            self.b = rng.integers(-128, 128, b_shape).astype(np.int8)
        self.a32, self.b32 = self.a.astype(np.float32), self.b.astype(np.float32)
        exact = self.product(self.a.astype(np.float64), self.b.astype(np.float64))
        if self.dtype == "bf16":
            self.want = exact
            self.bound = error_bound(self.reduction, np.dtype(np.float32), float(np.abs(exact).max()))
        else:
            self.want, self.bound = exact.astype(np.int64).astype(np.int32), 0.0

    def product(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a @ self.matrix(b)

    def source(self, types: tuple[str, str, str]) -> str:
        return matmul_source(*self.shape, types=types, transposed=self.transposed)

    def args(self) -> tuple[np.ndarray, ...]:
        """The arguments of Loom's kernel of the type (`source(TYPES[dtype])`)."""
        return self.a, self.b

    @property
    def peer_bound(self) -> float:
        """How far a runtime's result may be from `want` (a requantized layer: one step)."""
        return self.bound

    def peer_want(self) -> np.ndarray:
        """`want` in the layout of the runtimes' results."""
        return self.want


class ConvProblem(Problem):
    """The same for a conv2d layer (`loom-bench --conv`'s): X and W of `dtype`."""

    def __init__(self, name: str, layer: Layer, dtype: str, rng: np.random.Generator, layout: str = "nchw"):
        n, c, h, w, f, r, s, strides, padding, dilations = self.layer = layer
        ho, wo = conv2d_output_hw(h, w, r, s, strides, padding, dilations)
        self.label, self.dtype, self.reduction, self.layout = name, dtype, c * r * s, layout
        self.ops = 2.0 * n * f * ho * wo * c * r * s
        self._draw(rng, *layer_shapes(layer, layout)[:2])

    def product(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return (conv2d_nhwc if self.layout == "nhwc" else conv2d_nchw)(a, b, *self.layer[7:])

    def source(self, types: tuple[str, str, str]) -> str:
        return conv_source(self.layer, self.layout, types)

    def peer_want(self) -> np.ndarray:
        return self.want if self.layout == "nchw" else self.want.transpose(0, 3, 1, 2)  # (the graphs': NCHW)


class RequantizedConvProblem(ConvProblem):
    """A quantized conv2d layer (`--conv --dtype int8 --requantize`): u8 X (scale, zero point
    0) and s8 W (a scale per output channel), the i32 sums + an i32 bias, dequantized by
    the product of the scales, requantized to u8 with the output's scale and zero point 0
    (saturating: the ReLU of a quantized network), one fused kernel in Loom. X holds 7-bit
    values, 0..127: the range x86 quantization gives activations on CPUs without VNNI
    (torch's `reduce_range`), where the runtimes sum u8 x s8 pairs in saturating 16 bits
    (`vpmaddubsw`: over the full range ONNX Runtime, OpenVINO and torch were all 23 steps
    off on 3x3 C128 28^2, znver3; on 7 bits all three are exact). Loom is checked bit for
    bit against its numpy reference; a peer within one step of it passes (the runtimes
    requantize with one multiplier, x_scale * w_scale / y_scale, Loom in two steps: f32
    roundings may differ by one at a half)."""

    def __init__(self, name: str, layer: Layer, rng: np.random.Generator, layout: str = "nchw"):
        super().__init__(name, layer, "int8", rng, layout)
        self.a = self.a >> 1
        self.a32 = self.a.astype(np.float32)
        sums = self.product(self.a.astype(np.float64), self.b.astype(np.float64))
        f = layer[4]
        x_scale, w_scales = 0.02, rng.uniform(0.5, 1.5, f) * 0.01
        bias = rng.integers(-5000, 5000, f).astype(np.int32)
        axis = 1 if layout == "nchw" else 3
        shape = [1] * 4
        shape[axis] = f
        scale = (x_scale * w_scales).astype(np.float32)
        # the output's scale spreads the layer's values over about 40 steps per standard deviation
        y_scale = float(np.std((sums + bias.reshape(shape)) * scale.reshape(shape))) / 40
        self.quantized = anchors.Quantized(bias, x_scale, w_scales, y_scale, 0)
        self._params = (bias.reshape(shape[1:]), scale, np.zeros(f, np.int32), np.array(y_scale, np.float32),
                        np.array(0, np.int32))
        self._layer_source = requantized_source(layer, layout, axis)
        self.want = compiler_reference(self._layer_source, *self.args())
        self.bound = 0.0

    def source(self, types: tuple[str, str, str]) -> str:
        return self._layer_source if types == TYPES["int8"] else super().source(types)

    def args(self) -> tuple[np.ndarray, ...]:
        return self.a, self.b, *self._params

    @property
    def peer_bound(self) -> float:
        return 1.0


def requantized_source(layer: Layer, layout: str, axis: int) -> str:
    """The quantized layer of `RequantizedConvProblem`: conv2d (u8 x s8 -> i32) + bias,
    dequantize (a scale per channel along `axis`), quantize to u8."""
    x, w, y = layer_shapes(layer, layout)
    f = layer[4]
    bias = [1] * 3
    bias[axis - 1] = f
    tx, tw = f"tensor<{'x'.join(map(str, x))}xui8>", f"tensor<{'x'.join(map(str, w))}xi8>"
    dims = "x".join(map(str, y))
    ta, tf, tq = f"tensor<{dims}xi32>", f"tensor<{dims}xf32>", f"tensor<{dims}xui8>"
    tb, tv, tz = f"tensor<{'x'.join(map(str, bias))}xi32>", f"tensor<{f}xf32>", f"tensor<{f}xi32>"
    conv = conv_source(layer, layout, ("ui8", "i8", "i32")).splitlines()[1].strip()
    return (f"func.func @layer(%x: {tx}, %w: {tw}, %bias: {tb}, %scale: {tv}, %zero: {tz}, %os: tensor<f32>, "
            f"%oz: tensor<i32>) -> {tq} {{\n"
            f"  {conv}\n"
            f"  %sum = loom.add %y, %bias : ({ta}, {tb}) -> {ta}\n"
            f"  %d = loom.dequantize %sum, %scale, %zero {{axis = {axis} : i64}} : ({ta}, {tv}, {tz}) -> {tf}\n"
            f"  %q = loom.quantize %d, %os, %oz : ({tf}, tensor<f32>, tensor<i32>) -> {tq}\n"
            f"  func.return %q : {tq}\n}}\n")


def runtime_peers(problem: Problem, threads: int) -> list[anchors.Peer]:
    """ONNX Runtime's and OpenVINO's kernels of the problem (`--peers`): bf16 values as f32
    arrays (the runtimes take bf16 through OpenVINO's precision hint)."""
    a, b = (problem.a32, problem.b32) if problem.dtype == "bf16" else (problem.a, problem.b)
    if isinstance(problem, RequantizedConvProblem):
        return anchors.quantized_conv_peers(*anchors.nchw(a, b, problem.layout), problem.quantized, threads,
                                            conv=problem.layer[7:])
    if isinstance(problem, ConvProblem):
        a, b = anchors.nchw(a, b, problem.layout)
        return anchors.kernel_peers("conv2d", a, b, problem.dtype, threads, conv=problem.layer[7:])
    return anchors.kernel_peers("matmul", a, problem.matrix(b), problem.dtype, threads)


def torch_peers(problem: Problem, threads: int) -> dict[str, Callable[[], object]]:
    """torch's kernels for the problem's type, by name (none where torch is not installed,
    or where a kernel's shape rules exclude the shape)."""
    try:
        import torch
    except (ImportError, OSError):
        return {}
    torch.set_num_threads(threads)
    if isinstance(problem, RequantizedConvProblem):
        return {"torch quantized Conv2d": torch_quantized_conv(torch, problem)}
    if isinstance(problem, ConvProblem):
        if problem.dtype != "bf16":
            return {}
        return {"torch bf16 conv2d": torch_conv(problem.a, problem.b, problem.layer, threads, problem.layout)}
    m, n, k = problem.shape
    # B as torch's view of the argument (W's transpose where `transposed`: no copy)
    tb = torch_from_numpy(torch, problem.b)
    tb = tb.t() if problem.transposed else tb
    if problem.dtype == "bf16":
        ta = torch_from_numpy(torch, problem.a)
        return {"torch bf16 matmul": lambda: torch.matmul(ta, tb)}
    peers: dict[str, Callable[[], object]] = {}
    if m > 16 and k % 8 == 0 and n % 8 == 0:  # (s8 x s8: u8 A shifted by -128 for it, the same work)
        signed = torch.from_numpy(problem.a if problem.dtype == "s8" else
                                  (problem.a.astype(np.int16) - 128).astype(np.int8))
        peers["torch _int_mm"] = lambda: torch._int_mm(signed, tb)
    linear = torch.nn.Linear(k, n, bias=False)
    with torch.no_grad():
        linear.weight.copy_(torch.from_numpy(np.ascontiguousarray(problem.matrix(problem.b32).T)))
    with warnings.catch_warnings():  # torch 2.13 calls its eager quantization deprecated; it still ships it
        warnings.simplefilter("ignore", (DeprecationWarning, UserWarning))
        quantized = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(linear), {torch.nn.Linear},
                                                           dtype=torch.qint8)
    x = torch.from_numpy(problem.a32)

    def dynamic() -> object:
        with torch.no_grad():
            return quantized(x)

    peers["torch dynamic int8 Linear"] = dynamic
    return peers


def torch_quantized_conv(torch, problem: RequantizedConvProblem) -> Callable[[], object]:
    """torch's quantized Conv2d (the `x86` engine: FBGEMM / oneDNN) of the layer: u8 X and s8
    W per channel as torch's quantized tensors (made once), the output requantized to u8 in
    the kernel, NCHW (channels_last for NHWC)."""
    q = problem.quantized
    x, w = anchors.nchw(problem.a, problem.b, problem.layout)
    with warnings.catch_warnings():  # torch 2.13 calls its quantized tensors deprecated; it still ships them
        warnings.simplefilter("ignore", (DeprecationWarning, UserWarning))
        qx = torch._make_per_tensor_quantized_tensor(torch.from_numpy(x), q.x_scale, 0)
        qw = torch._make_per_channel_quantized_tensor(torch.from_numpy(w), torch.from_numpy(q.w_scales),
                                                      torch.zeros(w.shape[0], dtype=torch.long), 0)
    if problem.layout == "nhwc":
        qx = qx.contiguous(memory_format=torch.channels_last)
    (sh, sw), (ph, pw), (dh, dw) = problem.layer[7:]
    conv = torch.ao.nn.quantized.Conv2d(w.shape[1], w.shape[0], w.shape[2:], stride=(sh, sw), padding=(ph, pw),
                                        dilation=(dh, dw))
    conv.set_weight_bias(qw, torch.from_numpy(q.bias * (q.x_scale * q.w_scales)).float())
    conv.scale, conv.zero_point = q.y_scale, q.y_zero

    def run() -> object:
        with torch.no_grad():
            return conv(qx).int_repr()

    return run


@dataclass
class Row:
    label: str
    ops: float
    dtype: str
    threads: int
    seconds: float
    f32_seconds: float
    peers: dict[str, float]  # name -> seconds
    max_err: float
    bound: float
    compile_seconds: float
    #: Loom's low-precision kernel over its f32 kernel, per round
    ratios: tuple[float, ...] = ()
    #: the max error of each ONNX Runtime / OpenVINO peer's result (`--peers`)
    peer_errors: dict[str, float] = field(default_factory=dict)
    #: how far a peer's result may be from the reference (the row's bound but for a
    #: requantized layer's one step)
    peer_bound: float = 0.0

    def rate(self, seconds: float) -> float:
        """GFLOP/s (GOP/s for int8) of this shape done in `seconds`."""
        return self.ops / seconds / 1e9

    @property
    def over_f32(self) -> float:
        return float(np.median(self.ratios)) if self.ratios else self.f32_seconds / self.seconds

    @property
    def over_best_peer(self) -> float | None:
        return min(self.peers.values()) / self.seconds if self.peers else None

    @property
    def ok(self) -> bool:
        return bool(self.max_err <= self.bound)


def measure(problem: Problem, *, pipeline: str = "default", repeat: int = 10, budget: float = 2.0,
            rounds: int = 1, threads: int = 1, with_runtimes: bool = False) -> Row:
    """Compile Loom's kernel of the problem's type and its f32 kernel, check both, and time
    them interleaved with torch's peers (and ONNX Runtime's and OpenVINO's with
    `with_runtimes`, each checked once: its error is reported, not judged) (`timed_rounds`:
    medians over the rounds)."""
    kernel, compile_seconds = compile_fresh(problem.source(TYPES[problem.dtype]), pipeline, threads)
    f32, _ = compile_fresh(problem.source(("f32", "f32", "f32")), pipeline, threads)
    args = problem.args()
    got = kernel(*args)
    err = float(np.abs(got.astype(np.float64) - problem.want).max())
    f32_want = problem.product(problem.a32.astype(np.float64), problem.b32.astype(np.float64))
    f32_err = float(np.abs(f32(problem.a32, problem.b32) - f32_want).max())
    if f32_err > error_bound(problem.reduction, np.dtype(np.float32), float(np.abs(f32_want).max())):
        err = float("inf")  # the f32 kernel it is compared with is wrong: the row fails
    peers = torch_peers(problem, threads)
    runtimes = runtime_peers(problem, threads) if with_runtimes else []
    peer_errors = {p.name: p.check(problem.peer_want()) for p in runtimes}
    peers.update({p.name: p.run for p in runtimes})
    fns = [lambda: kernel(*args), lambda: f32(problem.a32, problem.b32), *peers.values()]
    for f in fns[1:]:
        f()
    timing = timed_rounds(fns, budget=budget, at_most=repeat, rounds=rounds, settle=SETTLE if threads > 1 else 0.0)
    return Row(problem.label, problem.ops, problem.dtype, threads, timing.median(0), timing.median(1),
               {name: timing.median(2 + i) for i, name in enumerate(peers)}, err, problem.bound, compile_seconds,
               timing.ratios(1) if rounds > 1 else (), peer_errors, problem.peer_bound)


def run(shapes: Sequence[Shape] = DTYPE_SHAPES, dtype: str = "bf16", *, pipeline: str = "default",
        repeat: int = 10, budget: float = 2.0, seed: int = 0, rounds: int = 1, threads: int = 1,
        on_row: Callable[[Row], None] | None = None, layers: dict[str, Layer] | None = None,
        layout: str = "nchw", with_runtimes: bool = False, transposed: bool = False,
        requantize: bool = False) -> list[Row]:
    """Measure each matmul shape, or with `layers` each conv2d layer (in `layout`; int8 with
    `requantize`: the quantized layer, `RequantizedConvProblem`)."""
    rng = np.random.default_rng(seed)
    if layers is None:
        problems: Iterable[Problem] = (Problem(shape, dtype, rng, transposed) for shape in shapes)
    elif requantize:
        problems = (RequantizedConvProblem(name, layer, rng, layout) for name, layer in layers.items())
    else:
        problems = (ConvProblem(name, layer, dtype, rng, layout) for name, layer in layers.items())
    rows = []
    for problem in problems:
        row = measure(problem, pipeline=pipeline, repeat=repeat, budget=budget, rounds=rounds, threads=threads,
                      with_runtimes=with_runtimes)
        rows.append(row)
        if on_row:
            on_row(row)
    return rows


def markdown(rows: list[Row], conv: bool = False) -> str:
    """The table: Loom's rate in the type and in f32, their ratio, each peer's rate, Loom over
    the fastest peer, Loom's share of the type's peak."""
    if not rows:
        return ""
    dtype, threads = rows[0].dtype, rows[0].threads
    unit = "GFLOP/s" if dtype == "bf16" else "GOP/s"
    names = list(dict.fromkeys(name for r in rows for name in r.peers))
    peak = peak_gflops(PEAK_TYPES.get(dtype, dtype), threads)
    out = [f"| {'layer' if conv else 'shape M×N×K'} | Loom {dtype} {unit} | Loom f32 GFLOP/s | {dtype}/f32 |"
           + "".join(f" {name} {unit} |" for name in names) + " Loom/fastest peer | share of peak | check |",
           "|---|---:|---:|---:|" + "---:|" * len(names) + "---:|---:|---|"]
    for r in rows:
        peers = "".join(f" {cell(r.rate(r.peers[name]) if name in r.peers else None, '.1f')} |" for name in names)
        out.append(f"| {r.label} | {r.rate(r.seconds):.1f} | {r.rate(r.f32_seconds):.1f} | "
                   f"{r.over_f32:.2f}x |{peers} {cell(r.over_best_peer, '.2f')} | {r.rate(r.seconds) / peak:.0%} | "
                   f"{'ok' if r.ok else 'MISMATCH'} |")
    return "\n".join(out) + anchors.errors_note({r.label: r.peer_errors for r in rows},
                                                {r.label: r.peer_bound for r in rows})


def as_json(rows: list[Row]) -> list[dict]:
    return [{"label": r.label, "ops": r.ops, "dtype": r.dtype, "threads": r.threads, "seconds": r.seconds,
             "rate": r.rate(r.seconds), "f32_seconds": r.f32_seconds, "over_f32": r.over_f32,
             "peers": {name: {"seconds": s, "rate": r.rate(s)} for name, s in r.peers.items()},
             "over_best_peer": r.over_best_peer, "max_err": r.max_err, "bound": r.bound, "ok": r.ok,
             "compile_seconds": r.compile_seconds, "ratios": list(r.ratios), "peer_errors": r.peer_errors}
            for r in rows]


def mode(args) -> int:
    """`loom-bench --shapes|--conv --dtype bf16|int8`: the table (or JSON); the exit status."""
    layers = LAYERS[args.layers] if args.conv else None
    rows = run(args.shapes_list, args.dtype, pipeline=args.pipeline, repeat=args.repeat, budget=args.budget,
               rounds=args.rounds, threads=args.threads, on_row=None if args.json else _progress, layers=layers,
               layout=args.layout, with_runtimes=args.peers, transposed=args.transposed, requantize=args.requantize)
    machine = bench_machine()
    path = dot_path(PEAK_TYPES.get(args.dtype, args.dtype))
    if args.json:
        print(json.dumps({"machine": machine, "instruction": path.describe(), "rows": as_json(rows)}, indent=1))
    else:
        print(f"machine: {machine}\n{args.dtype} peak: {peak_gflops(PEAK_TYPES.get(args.dtype, args.dtype), args.threads):.1f} "
              f"{'GFLOP/s' if args.dtype == 'bf16' else 'GOP/s'} on {path.describe()} (compiler/measure/peak.py; "
              "the kernel's own path: --remarks)\n"
              f"pipeline: {args.pipeline}, threads: {args.threads}{', ' + args.layout.upper() if args.conv else ''}"
              + (", B = W.T (x @ w.T, W an N x K array)" if args.transposed else "")
              + (", each layer quantized: (conv2d + i32 bias) x scales, requantized to uint8 in the kernel"
                 if args.requantize else "")
              + (f"\n{anchors.header()}" if args.peers else "") + "\n")
        print(markdown(rows, conv=args.conv))
    return 0 if all(r.ok for r in rows) else 1


def _progress(row: Row) -> None:
    peers = ", ".join(f"{name} {row.rate(s):.1f}" for name, s in row.peers.items())
    print(f"  {row.label:<16} {row.seconds:.4g} s  {row.rate(row.seconds):7.1f}  (Loom f32 "
          f"{row.rate(row.f32_seconds):.1f}{', ' + peers if peers else ''})  compile {row.compile_seconds:.2f} s"
          f"{'' if row.ok else '  MISMATCH'}", file=sys.stderr)

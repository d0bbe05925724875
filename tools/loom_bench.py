"""loom-bench: Loom's matmul beside numpy, in one process, interleaved, medians.

    loom-bench --stages [--sizes 8,32,128] [--repeat N] [--budget S] [--json] [--show-ir]
    loom-bench --shapes [--shapes-list 64,128x768x3072,...] [--pipeline P] [--repeat N]
                        [--budget S] [--rounds R] [--threads T] [--transposed] [--json] [--plot out.png]
    loom-bench --ablation [--shapes-list 1024,127x255x511] [--repeat N] [--budget S] [--json]
    loom-bench --compile [--examples F1,F2|none] [--chain 1000,...] [--matmul 1024|none]
                         [--pipeline P] [--json]
    loom-bench --conv [--layers resnet|family|all] [--layout nchw|nhwc] [--threads T] [--rounds R] [--repeat N]
                      [--budget S] [--json] [--plot out.png]
    loom-bench --peak [--threads T] [--json]
    loom-bench --fusion [--rounds R] [--repeat N] [--budget S] [--json]
    loom-bench --model resnet18,mlp [--batches 1,8] [--threads-list 1,2] [--rounds R] [--repeat N]
                       [--budget S] [--json]

`--stages` retells the classic report on CPU matmul optimizations with Loom's passes:
naive, tiling, permutation, invariant hoisting, unrolling; each stage checked against
numpy and timed beside it.

`--shapes` compiles one pipeline (`default`, the cost model's, unless `--pipeline` names
another or gives a pass list) for each matmul shape MxNxK (C[M,N] = A[M,K] @ B[K,N], f32;
a bare n is n x n x n) and times it beside numpy, and torch when it is installed (one
thread each). `--rounds R` does that R times over per shape: loom/numpy is then the median
of the rounds' ratios, and the table gives their range (on a shared machine one round's
ratio can be a few percent off). `--plot out.png` draws GFLOP/s per shape (needs
matplotlib: the `bench` extra). `--threads T` compiles Loom's kernels for T threads and
gives numpy's (and torch's) pool T threads, times Loom's one-thread kernel in the same
rounds (the speedup column), and times each function's runs in a block after 0.2 s of
sleep, so that one library's idle threads, still spinning, do not share the cores with
the next one's (OpenBLAS's spin for about 0.1 s after a call). `--transposed` passes B
as the transpose of an N x K array W (`x @ w.T`, a linear layer's weight as torch stores
it), to Loom (a strided view, never copied by the caller), numpy and torch alike.

`--ablation` times the default pipeline and the default pipeline minus each of its steps
(`loom-default{skip=STEP}`) at each shape, each beside numpy.

`--compile` times compilation, stage by stage (CPU seconds: parse and verify, set-up,
each pass of the pipeline, LLVM emission, LLVM's O3, machine code generation; the
kernel checked is the one timed: `compile(timings=...)`), for the example
kernels (examples/*.mlir, or `--examples`: files, or none), for chains of elementwise
ops (`--chain`: their lengths, 1000 by default) with `--pipeline` (default: default),
and for the default pipeline's matmul (`--matmul`, 1024 by default; `none` skips it) in
a fresh process, cold (its first compile) and warm, with the time `import compiler`
takes there; then that matmul's compile() in fresh processes sharing an empty disk cache:
the first compiles and stores it, the next five find it on disk (a hit's milliseconds
beyond import).

`--conv` times the default pipeline's conv2d on ResNet-like layers (`--layers resnet`:
the 3x3 stages, the 7x7 stride-2 stem at batch 8, a 1x1; `family`: a stride-2 3x3, a
512-channel 7x7 map, a dilated 5x5, a 3-channel 32x32 batch; default all) beside torch
(when installed) and beside numpy doing the same im2col + matmul by hand, on `--threads`
threads, interleaved, medians of `--rounds` rounds (tools/bench/conv.py); `--layout
nhwc` gives Loom NHWC input and HWCF filter, torch channels_last tensors. The table
names the strategy the default pipeline chose per layer (direct or im2col); `--plot
out.png` draws GFLOP/s per layer.

`--peak` measures the machine's vector FMA peak afresh (compiler/measure/peak.py: independent FMA
chains, best of 5 runs), f32 and f64, on one thread and on `--threads`, and keeps the best
figure known in Loom's cache, where the other modes' tables (their `peak:` line) and
`compiler.explain` read it: a kernel's GFLOP/s over it is its share of what the machine can do.

`--fusion` times epilogue fusion (loom-fuse-epilogue, the default pipeline's step `fuse`),
one thread: relu(x @ w + b) at 128x768x3072 and 128x3072x768 (M x N x K) beside numpy's
`np.maximum(x @ w + b, 0)`, and conv2d + bias + relu on ResNet-like layers in NCHW and
NHWC; each fused (`default`) against unfused (`loom-default{skip=fuse}`) and the matmul or
conv2d alone, interleaved, in `--rounds` rounds (5 is a good number on a shared machine):
the medians of the rounds, and the range of the ratios.

`--model` runs whole torch models through `compiler.torch_backend` (torch.compile) beside
torch eager (tools/bench/models.py; needs the `bench` extra: torch, and torchvision for
resnet18): ResNet-18 at 224x224 with random weights, and the MLP block 128x768 -> 3072 ->
relu -> 768 (batch sequences of 128 tokens), at each batch size and thread count, one
process, interleaved, medians of rounds; the table gives eager/Loom, the relative error,
how many ATen ops ran in Loom, and the compile time (first call) cold and warm from the
disk cache.

Every kernel is checked against the float64 numpy reference; the exit status is 1 if
any check fails.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tools import console_entry, report_error

SIZES = "8,32,128,256,512,1024"
#: the defaults of tools.bench.matmul.SHAPES and ABLATION_SHAPES, written out: the command line
#: is parsed before numpy (hence compiler) is imported, see tools.numpy_env
SHAPES = "64,128,256,512,1024,2048,1000,128x768x3072,197x768x768,127x255x511,1x4096x4096"
ABLATION_SHAPES = "1024,127x255x511"
CHAIN = "1000"  # tools.bench.matmul.CHAIN_LENGTHS
MODELS = ("resnet18", "mlp")  # tools.bench.models.MODELS


def parse_shape(text: str) -> tuple[int, int, int]:
    """`MxNxK` -> (M, N, K) for C[M,N] = A[M,K] @ B[K,N]; a bare `n` is n x n x n.
    A ValueError says what is wrong."""
    t = text.strip()
    parts = t.lower().split("x")
    try:
        if len(parts) not in (1, 3):
            raise ValueError
        dims = [int(x) for x in parts]
    except ValueError:
        raise ValueError(f"bad shape {t!r}: expected N or MxNxK with positive integers, "
                         "e.g. 64 or 128x768x3072") from None
    if min(dims) < 1:
        raise ValueError(f"bad shape {t!r}: every dimension must be at least 1")
    m, n, k = dims * 3 if len(dims) == 1 else dims
    return m, n, k


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    """A comma-separated list of shapes (see `parse_shape`)."""
    return [parse_shape(t) for t in text.split(",")]


def parse_args(argv):
    p = argparse.ArgumentParser(prog="loom-bench", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[2:]))
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--stages", action="store_true", help="the staged table (naive -> tiling -> ...)")
    mode.add_argument("--shapes", action="store_true", help="one pipeline at matmul shapes MxNxK, beside numpy")
    mode.add_argument("--ablation", action="store_true", help="the default pipeline minus each of its steps")
    mode.add_argument("--compile", action="store_true", help="compile time by stage")
    mode.add_argument("--conv", action="store_true", help="conv2d layers beside torch and numpy im2col + matmul")
    mode.add_argument("--peak", action="store_true", help="measure the machine's vector FMA peak, f32 and f64")
    mode.add_argument("--fusion", action="store_true", help="epilogue fusion: fused against unfused and numpy")
    mode.add_argument("--model", metavar="NAMES",
                      help="torch models through compiler.torch_backend beside torch eager: resnet18, mlp")
    p.add_argument("--batches", default="1,8", help="--model: batch sizes (default 1,8)")
    p.add_argument("--threads-list", default="1,2", help="--model: thread counts (default 1,2)")
    p.add_argument("--layers", choices=("resnet", "family", "all"), help="--conv: which layers (default all)")
    p.add_argument("--layout", choices=("nchw", "nhwc"),
                   help="--conv: NCHW input and FCHW filter (default), or NHWC and HWCF (torch: channels_last)")
    p.add_argument("--sizes", help=f"--stages: square sizes N (default {SIZES})")
    p.add_argument("--shapes-list", metavar="SHAPES",
                   help=f"--shapes/--ablation: comma-separated N or MxNxK (default {SHAPES}; "
                        f"for --ablation {ABLATION_SHAPES})")
    p.add_argument("--pipeline", metavar="P",
                   help="--shapes, --compile: named pipeline or pass list (default: default)")
    p.add_argument("--examples", metavar="FILES",
                   help="--compile: comma-separated .mlir files, or none (default: the repository's examples/*.mlir)")
    p.add_argument("--chain", metavar="N,...", help=f"--compile: lengths of the elementwise chains (default {CHAIN})")
    p.add_argument("--matmul", metavar="SHAPE",
                   help="--compile: the default pipeline's matmul, N or MxNxK, or none (default 1024)")
    p.add_argument("--repeat", type=int, default=10, help="at most this many timed runs per kernel")
    p.add_argument("--budget", type=float, default=2.0, help="seconds of timing per kernel and size")
    p.add_argument("--rounds", type=int, default=1,
                   help="--shapes, --conv: time each shape this many times over; loom/numpy is the median "
                        "round, and the table adds the range")
    p.add_argument("--threads", type=int, default=1,
                   help="--shapes, --conv: threads for Loom and numpy (and torch); --shapes adds Loom on one "
                        "thread (default 1)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a markdown table")
    p.add_argument("--show-ir", action="store_true", help="--stages: print each stage's loop nest (at the smallest N)")
    p.add_argument("--transposed", action="store_true",
                   help="--shapes: B is the transpose of an N x K array (x @ w.T), for Loom, numpy and torch")
    p.add_argument("--plot", metavar="PNG",
                   help="--shapes, --conv: write a bar chart of GFLOP/s per shape or layer (needs matplotlib)")
    args = p.parse_args(argv)
    if not (args.stages or args.shapes or args.ablation or args.compile or args.conv or args.peak or args.fusion
            or args.model):
        p.error("nothing to do: pass --stages, --shapes, --ablation, --compile, --conv, --peak, --fusion or --model")
    if args.repeat < 1 or args.budget <= 0 or args.rounds < 1 or args.threads < 1:
        p.error("--repeat, --budget, --rounds and --threads must be positive")
    for flag, value, modes in (("--sizes", args.sizes, ("stages",)), ("--show-ir", args.show_ir, ("stages",)),
                               ("--shapes-list", args.shapes_list, ("shapes", "ablation")),
                               ("--pipeline", args.pipeline, ("shapes", "compile")), ("--plot", args.plot, ("shapes", "conv")),
                               ("--transposed", args.transposed, ("shapes",)),
                               ("--examples", args.examples, ("compile",)), ("--chain", args.chain, ("compile",)),
                               ("--matmul", args.matmul, ("compile",)),
                               ("--rounds", args.rounds != 1, ("shapes", "conv", "fusion", "model")),
                               ("--batches", args.batches != "1,8", ("model",)),
                               ("--threads-list", args.threads_list != "1,2", ("model",)),
                               ("--threads", args.threads != 1 and not args.peak, ("shapes", "conv")),
                               ("--layers", args.layers, ("conv",)), ("--layout", args.layout, ("conv",))):
        if value and not any(getattr(args, m) for m in modes):
            p.error(f"{flag} applies to {' and '.join('--' + m for m in modes)} only")
    if args.compile:
        _parse_compile_args(p, args)
    elif args.model:
        _parse_model_args(p, args)
    elif args.conv:
        args.layers = args.layers or "all"
        args.layout = args.layout or "nchw"
    elif args.stages:
        try:
            args.sizes = [int(x) for x in (args.sizes or SIZES).split(",")]
        except ValueError:
            p.error(f"--sizes must be comma-separated integers, got {args.sizes!r}")
        if min(args.sizes) < 1:
            p.error("--sizes must be positive")
    elif args.shapes or args.ablation:
        try:
            args.shapes_list = parse_shapes(args.shapes_list or (SHAPES if args.shapes else ABLATION_SHAPES))
        except ValueError as e:
            p.error(f"--shapes-list: {e}")
        args.pipeline = args.pipeline or "default"
    return args


def _parse_model_args(p, args) -> None:
    names = [n.strip() for n in args.model.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if not names or unknown:
        p.error(f"--model: unknown model {', '.join(unknown) or repr(args.model)} (expected {', '.join(MODELS)})")
    args.model = names
    for flag in ("batches", "threads_list"):
        try:
            values = [int(v) for v in getattr(args, flag).split(",")]
        except ValueError:
            values = []
        if not values or min(values) < 1:
            p.error(f"--{flag.replace('_', '-')} must be comma-separated positive integers, "
                    f"got {getattr(args, flag)!r}")
        setattr(args, flag, values)


def main(argv=None) -> int:
    args = parse_args(argv)
    from tools.numpy_env import prepare_numpy_for_timing

    blas = prepare_numpy_for_timing(args.threads)
    from tools.bench import matmul as bench

    if args.plot:
        try:
            bench.require_matplotlib()  # before the benchmark, not after minutes of it
        except bench.MissingMatplotlib as e:
            print(f"loom-bench: error: {e}", file=sys.stderr)
            return 1
    try:
        return _run_mode(args, bench, blas)
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # bad input (a kernel too big for memory, say) or a bug: one line
        report_error("loom-bench", e)
        return 1


def _run_mode(args, bench, blas: str) -> int:
    """Run the mode asked for and print its table; the exit status."""
    if args.stages:
        rows = run_stages(args, bench)
    elif args.shapes:
        rows = bench.run_shapes(args.shapes_list, pipeline=args.pipeline, repeat=args.repeat,
                                budget=args.budget, rounds=args.rounds, threads=args.threads,
                                transposed=args.transposed, on_row=None if args.json else _progress)
    elif args.compile:
        return _compile_mode(args, bench, blas)
    elif args.peak:
        return _peak_mode(args, bench)
    elif args.fusion:
        return _fusion_mode(args, bench, blas)
    elif args.model:
        return _model_mode(args, bench, blas)
    elif args.conv:
        return _conv_mode(args, bench, blas)
    else:
        rows = bench.run_ablation(args.shapes_list, repeat=args.repeat, budget=args.budget,
                                  on_row=None if args.json else _progress_ablation)
    machine = bench.bench_machine()
    table, as_json = {
        "stages": (bench.markdown, bench.as_json),
        "shapes": (bench.markdown_shapes, bench.shapes_json),
        "ablation": (bench.markdown_ablation, bench.ablation_json),
    }["stages" if args.stages else "shapes" if args.shapes else "ablation"]
    threads = args.threads if args.shapes else 1
    if args.json:
        print(json.dumps({"machine": machine, "blas": blas, "rows": as_json(rows)}, indent=1))
    else:
        print(f"machine: {machine}\n{bench.peak_line(threads)}\n{blas}\n")
        if args.shapes:
            b = ", B = W.T (x @ w.T, W an N x K array)" if args.transposed else ""
            print(f"pipeline: {args.pipeline}, threads: {args.threads}{b}\n")
        print(table(rows))
    if args.plot:
        threads = "one thread" if args.threads == 1 else f"{args.threads} threads"
        if not _write_plot(args.plot, lambda: bench.plot_shapes(
                rows, args.plot, title=f"Loom ({args.pipeline}) vs numpy: f32 matmul, {threads}\n{machine}\n{blas}")):
            return 1
    return 0 if all(r.ok for r in rows) else 1


def _conv_mode(args, bench, blas: str) -> int:
    from tools.bench import conv as bench_conv

    def progress(m) -> None:
        torch = "" if m.torch_seconds is None else f", torch {m.gflops(m.torch_seconds):.1f}"
        print(f"  {m.name:<20} {m.strategy:<6} {m.seconds:.4g} s  {m.gflops(m.seconds):7.1f} GFLOP/s  (numpy im2col "
              f"{m.gflops(m.numpy_seconds):.1f}{torch})  compile {m.compile_seconds:.2f} s"
              f"{'' if m.ok else '  MISMATCH'}", file=sys.stderr)

    rows = bench_conv.run_conv(bench_conv.LAYERS[args.layers], threads=args.threads, budget=args.budget,
                               repeat=args.repeat, rounds=args.rounds, layout=args.layout,
                               on_row=None if args.json else progress)
    machine = bench.bench_machine()
    if args.json:
        print(json.dumps({"machine": machine, "blas": blas, "rows": bench_conv.conv_json(rows)}, indent=1))
    else:
        print(f"machine: {machine}\n{bench.peak_line(args.threads)}\n{blas}\n\npipeline: default, "
              f"threads: {args.threads}, f32, {args.layout.upper()}\n")
        print(bench_conv.markdown_conv(rows))
    if args.plot:
        threads = "one thread" if args.threads == 1 else f"{args.threads} threads"
        if not _write_plot(args.plot, lambda: bench_conv.plot_conv(
                rows, args.plot, title=f"Loom (default) vs torch and numpy im2col: f32 conv2d "
                                       f"{args.layout.upper()}, {threads}\n{machine}\n{blas}")):
            return 1
    return 0 if all(r.ok for r in rows) else 1


def _fusion_mode(args, bench, blas: str) -> int:
    def progress(r) -> None:
        print(f"  {r.name:<44} fused {r.gflops(r.fused):6.1f}  unfused {r.gflops(r.unfused):6.1f}  alone "
              f"{r.gflops(r.alone):6.1f} GFLOP/s{'' if r.ok else '  MISMATCH or not fused'}", file=sys.stderr)

    rows = bench.run_fusion(bench.FUSION_DENSE, bench.FUSION_CONVS, budget=args.budget, repeat=args.repeat,
                            rounds=args.rounds, on_row=None if args.json else progress)
    machine = bench.bench_machine()
    if args.json:
        print(json.dumps({"machine": machine, "blas": blas, "rows": bench.fusion_json(rows)}, indent=1))
    else:
        print(f"machine: {machine}\n{bench.peak_line(1)}\n{blas}\n\nepilogue fusion, one thread, f32, "
              f"{args.rounds} round{'s' * (args.rounds != 1)} (GFLOP/s of the matmul's or conv2d's flops)\n")
        print(bench.markdown_fusion(rows))
    return 0 if all(r.ok for r in rows) else 1


def _model_mode(args, bench, blas: str) -> int:
    try:
        import torch
    except ImportError:
        print("loom-bench: error: --model needs torch (pip install 'loomir[bench]')", file=sys.stderr)
        return 1
    from tools.bench import models as bench_model

    def progress(r) -> None:
        print(f"  {r.model} batch {r.batch}, {r.threads} thread{'s' * (r.threads > 1)}: Loom {r.loom * 1e3:.2f} ms, "
              f"eager {r.eager * 1e3:.2f} ms, compile {r.cold:.1f} s cold, {r.warm:.1f} s warm"
              f"{'' if r.ok else '  MISMATCH'}", file=sys.stderr)

    rows = bench_model.run_models(args.model, batches=args.batches, threads=args.threads_list, budget=args.budget,
                                  repeat=args.repeat, rounds=args.rounds, on_row=None if args.json else progress)
    machine = bench.bench_machine()
    if args.json:
        print(json.dumps({"machine": machine, "torch": torch.__version__, "rows": bench_model.models_json(rows)},
                         indent=1))
    else:
        print(f"machine: {machine}\ntorch {torch.__version__}, Loom through torch.compile(backend=compiler."
              f"torch_backend), inference, f32, {args.rounds} round{'s' * (args.rounds != 1)}\n")
        print(bench_model.markdown_models(rows))
    return 0 if all(r.ok for r in rows) else 1


def _peak_mode(args, bench) -> int:
    """Measure the FMA peak afresh, f32 and f64, on one thread and on --threads; the cache
    keeps the best figure known."""
    from compiler.measure.peak import ITERATIONS, RUNS, cache_path, remeasure, vector_shape

    counts = sorted({1, args.threads})
    rows = {t: {dtype: remeasure(dtype, t) for dtype in ("f32", "f64")} for t in counts}
    machine = bench.bench_machine()
    if args.json:
        figures = []
        for t, row in rows.items():
            figure: dict[str, float] = {"threads": t}
            for dtype, (fresh, best) in row.items():
                figure.update({dtype: fresh, f"{dtype}_best": best})
            figures.append(figure)
        print(json.dumps({"machine": machine, "cache": str(cache_path()), "peak": figures}, indent=1))
        return 0
    lanes32, chains = vector_shape("f32")
    print(f"machine: {machine}\nFMA peak: {chains} independent chains of vector FMAs ({lanes32} f32 lanes, "
          f"{lanes32 // 2} f64), {ITERATIONS:,} iterations per thread, best of {RUNS} runs (compiler/measure/peak.py)\n")
    print("| threads | f32 GFLOP/s | f64 GFLOP/s |\n|---:|---:|---:|")
    for t, row in rows.items():
        cells = [f"{fresh:.1f}" + (f" (best known {best:.1f})" if best > fresh * 1.005 else "")
                 for fresh, best in row.values()]
        print(f"| {t} | {' | '.join(cells)} |")
    print(f"\ncached (the best known) in {cache_path()}")
    return 0


def _write_plot(path: str, draw) -> bool:
    """Run `draw`, which writes the plot to `path`; False (with the error said) when it cannot."""
    try:
        draw()
    except OSError as e:
        print(f"loom-bench: error: cannot write the plot {path}: {e.strerror or e}", file=sys.stderr)
        return False
    print(f"plot: {path}", file=sys.stderr)
    return True


def run_stages(args, bench):
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

    return bench.run_stages(args.sizes, repeat=args.repeat, budget=args.budget, on_row=on_row,
                            keep_stages=args.show_ir)


def _progress(row) -> None:
    from tools.bench.matmul import shape_label

    torch = "" if row.torch_gflops is None else f", torch {row.torch_gflops:.2f}"
    rounds = f", loom/numpy {min(row.ratios):.3f}-{max(row.ratios):.3f} over {len(row.ratios)} rounds" if row.ratios else ""
    serial = f", {row.speedup:.2f}x Loom's one thread" if row.speedup is not None else ""
    print(f"  {shape_label(row.shape):<14} {row.seconds:.4g} s  {row.gflops:7.2f} GFLOP/s"
          f"  (numpy {row.numpy_gflops:.2f}{torch}{rounds}{serial})  compile {row.compile_seconds:.2f} s"
          f"{'' if row.ok else '  MISMATCH'}", file=sys.stderr)


def _progress_ablation(row) -> None:
    from tools.bench.matmul import shape_label

    m = row.m
    print(f"  {shape_label(m.shape):<14} {row.variant:<24} {m.seconds:.4g} s  {m.gflops:7.2f} GFLOP/s"
          f"  (numpy {m.numpy_gflops:.2f})  x{row.slowdown:.2f} vs default"
          f"{'' if row.ok else '  MISMATCH'}", file=sys.stderr)


def _parse_compile_args(p: argparse.ArgumentParser, args) -> None:
    """--compile's options: the files read (a missing one is an error now, not after
    minutes), the chain lengths, the matmul shape or none."""
    if (args.examples or "").strip().lower() == "none":
        named = []
    elif args.examples:
        named = [(f.strip(), Path(f.strip())) for f in args.examples.split(",") if f.strip()]
    else:
        found = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.mlir"))
        named = [(f"examples/{path.name}", path) for path in found]
    args.examples = []
    for name, path in named:
        try:
            args.examples.append((name, path.read_text()))
        except (OSError, UnicodeDecodeError) as e:
            p.error(f"--examples: cannot read {path}: {e.strerror if isinstance(e, OSError) else 'not UTF-8 text'}")
    try:
        args.chain = [int(x) for x in (args.chain or CHAIN).split(",")]
    except ValueError:
        p.error(f"--chain must be comma-separated integers, got {args.chain!r}")
    if min(args.chain) < 1:
        p.error("--chain lengths must be at least 1")
    if (args.matmul or "").strip().lower() == "none":
        args.matmul = None
    else:
        try:
            args.matmul = parse_shape(args.matmul or "1024")
        except ValueError as e:
            p.error(f"--matmul: {e}")
    args.pipeline = args.pipeline or "default"


def _compile_mode(args, bench, blas: str) -> int:
    rows, imported = bench.run_compile(args.examples, chains=args.chain, pipeline=args.pipeline,
                                       matmul=args.matmul, on_row=None if args.json else _progress_compile)
    disk = bench.disk_hit(args.matmul) if args.matmul else None
    machine = bench.bench_machine()
    if args.json:
        print(json.dumps({"machine": machine, "blas": blas, "pipeline": args.pipeline,
                          **bench.compile_json(rows, imported), "disk_cache": disk}, indent=1))
    else:
        print(f"machine: {machine}\npipeline: {args.pipeline} (the matmul's: default)\n")
        print(bench.markdown_compile(rows, imported))
        if disk:
            print(f"\n{bench.markdown_disk_hit(disk)}")
    return 0 if all(r.ok for r in rows) and (disk is None or disk["ok"]) else 1


def _progress_compile(row) -> None:
    slowest = max(row.stages.items(), key=lambda kv: kv[1][0])
    print(f"  {row.name:<40} {row.cpu:7.3f} s CPU  {row.wall:7.3f} s wall  (most: {slowest[0]} "
          f"{slowest[1][0]:.3f} s){'' if row.ok else '  MISMATCH'}", file=sys.stderr)


def bench_machine() -> str:
    from tools.bench.matmul import bench_machine

    return bench_machine()


entry = console_entry(main)


if __name__ == "__main__":
    sys.exit(entry())

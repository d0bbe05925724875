"""loom-bench: Loom's matmul beside numpy, in one process, interleaved, medians.

    loom-bench --stages [--sizes 8,32,128] [--repeat N] [--budget S] [--json] [--show-ir]
    loom-bench --shapes [--shapes-list 64,128x768x3072,...] [--pipeline P] [--repeat N]
                        [--budget S] [--rounds R] [--threads T] [--transposed] [--json] [--plot out.png]
    loom-bench --shapes --dtype bf16|int8|s8 [--shapes-list ...] [--pipeline P] [--repeat N] [--budget S]
                        [--rounds R] [--threads T] [--transposed] [--json]
    loom-bench --ablation [--shapes-list 1024,127x255x511] [--repeat N] [--budget S] [--json]
    loom-bench --compile [--examples F1,F2|none] [--chain 1000,...] [--matmul 1024|none]
                         [--pipeline P] [--json]
    loom-bench --conv [--layers resnet|family|all] [--layout nchw|nhwc] [--threads T] [--rounds R] [--repeat N]
                      [--budget S] [--json] [--plot out.png]
    loom-bench --conv --dtype bf16|int8|s8 [--requantize] [--layers ...] [--layout ...] [--threads T] [--rounds R] [--json]
    loom-bench --peak [--threads T] [--json]
    loom-bench --fusion [--rounds R] [--repeat N] [--budget S] [--json]
    loom-bench --model resnet18,mlp [--dtype bf16] [--freeze] [--profile] [--batches 1,8] [--threads-list 1,2]
                       [--rounds R] [--repeat N] [--budget S] [--json]
    (--shapes, --conv and --model take --peers: ONNX Runtime and OpenVINO beside them)

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
`--dtype bf16` (bf16 A and B, f32 C), `--dtype int8` (u8 A, s8 B, i32 C, exact) or `--dtype
s8` (s8 A and B, i32 C, exact: `_int_mm`'s types) times Loom's low-precision matmul beside Loom's f32 matmul of the same shape and torch's bf16
matmul, `_int_mm` and dynamically quantized Linear (tools/bench/low_precision.py; default
shapes: 1024, 2048, 128x3072x768, 197x768x768), each a share of the type's peak.

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
beyond import); each times `import compiler`, compile() and one call. From those five,
start-up beside its targets: the median wall seconds of `import compiler` (0.2 s) and of
the kernel served from the disk cache end to end, import + compile() + one call (0.3 s).

`--conv` times the default pipeline's conv2d on ResNet-like layers (`--layers resnet`:
the 3x3 stages, the 7x7 stride-2 stem at batch 8, a 1x1; `family`: a stride-2 3x3, a
512-channel 7x7 map, a dilated 5x5, a 3-channel 32x32 batch; default all) beside torch
(when installed) and beside numpy doing the same im2col + matmul by hand, on `--threads`
threads, interleaved, medians of `--rounds` rounds (tools/bench/conv.py); `--layout
nhwc` gives Loom NHWC input and HWCF filter, torch channels_last tensors. The table
names the strategy the default pipeline chose per layer (direct or im2col); `--plot
out.png` draws GFLOP/s per layer. With `--dtype bf16|int8` the layers' X and W are of
the type (Y f32 or i32) and Loom's kernel is timed beside its f32 kernel of the layer and
torch's bf16 conv2d, as `--shapes --dtype` does for matmul. `--dtype int8 --requantize` makes
each layer a quantized one (u8 in, s8 filter per channel, + i32 bias, requantized to u8 in
the kernel: one fused nest in Loom) beside torch's quantized Conv2d and, with `--peers`,
ONNX Runtime's `QLinearConv` and OpenVINO's QDQ graph.

`--peak` measures the machine's vector FMA peak afresh (compiler/measure/peak.py: independent FMA
chains, best of 5 runs), f32 and f64, and the low-precision peaks on the dot-product instruction
the machine has (bf16: `vdpbf16ps`, else FMAs on values widened to f32; int8: `vpdpbusd`, else
`vpmaddwd` on values widened to i16), on one thread and on `--threads`, and keeps the best
figure known in Loom's cache, where the other modes' tables (their `peak:` line) and
`compiler.explain` read it: a kernel's GFLOP/s over it is its share of what the machine can do.

`--fusion` times epilogue fusion (loom-fuse-epilogue, the default pipeline's step `fuse`),
one thread: relu(x @ w + b) at 128x768x3072 and 128x3072x768 (M x N x K) beside numpy's
`np.maximum(x @ w + b, 0)`, and conv2d + bias + relu on ResNet-like layers in NCHW and
NHWC; each fused (`default`) against unfused (`loom-default{skip=fuse}`) and the matmul or
conv2d alone, interleaved, in `--rounds` rounds (5 is a good number on a shared machine):
the medians of the rounds, and the range of the ratios.

`--model` runs whole torch models through `compiler.torch_backend` (torch.compile) beside
torch eager (tools/bench/models.py; needs the `bench` extra: torch, and torchvision for the
CNNs): ResNet-18 at 224x224 with random weights (and resnet50, vgg11, regnet_y_400mf,
mobilenet_v2: grouped and depthwise convolutions among them), and the MLP block 128x768 -> 3072 ->
relu -> 768 (batch sequences of 128 tokens), at each batch size and thread count, one
process, interleaved, medians of rounds; the table gives eager/Loom, the relative error,
how many ATen ops ran in Loom, and the compile time (first call) cold and warm from the
disk cache. `--dtype bf16` runs the models converted with `model.to(torch.bfloat16)` on
bf16 inputs, in Loom and in torch eager (checked within 2e-2 relative of torch's bf16 run).
`--freeze` compiles with `freeze=True`: the parameters folded once and never checked again,
as the runtimes' compiled models assume (by default every call compares them bit for bit).
`--profile` adds, per row, where a call of the model spends its time (`compiler.explain(fast, x,
profile=True)`, compiler/explain/torch.py): each Loom kernel's loop nests by layer with their
GFLOP/s and share of the FMA peak, each op torch runs, the crossings between the two.

`--peers` adds ONNX Runtime and OpenVINO (the `anchors` extra; tools/bench/peers.py) to
`--shapes`, `--conv` (any `--dtype`) and `--model` (and there inductor, `torch.compile` with
`freezing`), in the same process and rounds: kernels
as one-node ONNX graphs with the weight a constant (`MatMul`/`Conv`; int8: ONNX Runtime's
`MatMulInteger`/`ConvInteger` and OpenVINO's int8 on a `DequantizeLinear` graph; bf16:
OpenVINO's bf16 precision hint, named with the precision it ran), models through
`torch.onnx.export`. Each peer's result is checked once and its error reported (a peer off
by more than the bound is listed under the table, timed all the same).

Every kernel is checked against the float64 numpy reference; the exit status is 1 if
any check fails.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools import console_entry, report_error

SIZES = "8,32,128,256,512,1024"
#: the defaults of tools.bench.matmul.SHAPES and ABLATION_SHAPES, written out: the command line
#: is parsed before numpy (hence compiler) is imported, see tools.numpy_env
SHAPES = "64,128,256,512,1024,2048,1000,128x768x3072,197x768x768,127x255x511,1x4096x4096"
ABLATION_SHAPES = "1024,127x255x511"
DTYPE_SHAPES = "1024,2048,128x3072x768,197x768x768"
CHAIN = "1000"  # tools.bench.compile_time.CHAIN_LENGTHS
MODELS = ("resnet18", "resnet50", "vgg11", "regnet_y_400mf", "mobilenet_v2", "mlp")  # tools.bench.models.MODELS


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
    mode.add_argument("--peak", action="store_true",
                      help="measure the machine's peaks: f32 and f64 FMAs, bf16 and int8 dot products")
    mode.add_argument("--fusion", action="store_true", help="epilogue fusion: fused against unfused and numpy")
    mode.add_argument("--model", metavar="NAMES",
                      help="torch models through compiler.torch_backend beside torch eager: " + ", ".join(MODELS))
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
    p.add_argument("--dtype", choices=("f32", "bf16", "int8", "s8"), default="f32",
                   help="--shapes, --conv: the element type (bf16: bf16 x bf16 -> f32; int8: u8 x s8 -> i32; "
                        "s8: s8 x s8 -> i32); "
                        "--model: bf16 runs model.to(torch.bfloat16) on bf16 inputs")
    p.add_argument("--peers", action="store_true",
                   help="--shapes, --conv, --model: time ONNX Runtime and OpenVINO beside them (one-node ONNX graphs; "
                        "models through torch.onnx.export), where installed: pip install 'loomir[anchors]'")
    p.add_argument("--freeze", action="store_true",
                   help="--model: compile with freeze=True (the parameters folded once, never checked again)")
    p.add_argument("--algorithms", choices=("exact", "fast"), default="exact",
                   help="--model: fast lets Loom use Winograd's convolution (algorithms=\"fast\": rounds differently, "
                        "within the bound in docs/guide/winograd.md)")
    p.add_argument("--profile", action="store_true",
                   help="--model: each row's profile: the time of each layer, torch op and crossing in a call")
    p.add_argument("--transposed", action="store_true",
                   help="--shapes: B is the transpose of an N x K array (x @ w.T), for Loom, numpy and torch")
    p.add_argument("--requantize", action="store_true",
                   help="--conv --dtype int8: each layer quantized (+ i32 bias, requantized to uint8 in the kernel)")
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
                               ("--transposed", args.transposed, ("shapes",)), ("--freeze", args.freeze, ("model",)),
                               ("--profile", args.profile, ("model",)),
                               ("--requantize", args.requantize, ("conv",)),
                               ("--peers", args.peers, ("shapes", "conv", "model")),
                               ("--dtype", args.dtype != "f32", ("shapes", "conv", "model")),
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
        args.pipeline = "default"
        if args.dtype != "f32" and args.plot:
            p.error(f"--dtype {args.dtype} has no plot: drop --plot")
        if args.requantize and args.dtype != "int8":
            p.error("--requantize quantizes int8 layers: add --dtype int8")
    elif args.stages:
        try:
            args.sizes = [int(x) for x in (args.sizes or SIZES).split(",")]
        except ValueError:
            p.error(f"--sizes must be comma-separated integers, got {args.sizes!r}")
        if min(args.sizes) < 1:
            p.error("--sizes must be positive")
    elif args.shapes or args.ablation:
        try:
            default = ABLATION_SHAPES if args.ablation else SHAPES if args.dtype == "f32" else DTYPE_SHAPES
            args.shapes_list = parse_shapes(args.shapes_list or default)
        except ValueError as e:
            p.error(f"--shapes-list: {e}")
        args.pipeline = args.pipeline or "default"
        if args.dtype != "f32" and args.plot:
            p.error(f"--dtype {args.dtype} has no plot: drop --plot")
    return args


def _parse_model_args(p, args) -> None:
    names = [n.strip() for n in args.model.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if not names or unknown:
        p.error(f"--model: unknown model {', '.join(unknown) or repr(args.model)} (expected {', '.join(MODELS)})")
    args.model = names
    if args.dtype in ("int8", "s8"):
        p.error(f"--model runs f32 or bf16 models: --dtype {args.dtype} applies to --shapes and --conv")
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
    # the modes import numpy (and compiler): only now, once OpenBLAS's environment is set
    from tools.bench import common

    if args.plot:
        try:
            common.require_matplotlib()  # before the benchmark, not after minutes of it
        except common.MissingMatplotlib as e:
            print(f"loom-bench: error: {e}", file=sys.stderr)
            return 1
    try:
        return _run_mode(args, blas)
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # bad input (a kernel too big for memory, say) or a bug: one line
        report_error("loom-bench", e)
        return 1


def _run_mode(args, blas: str) -> int:
    """Run the mode asked for (tools/bench/*), which prints its table; the exit status."""
    from tools.bench import common, compile_time, conv, fusion, low_precision, matmul, models

    if args.stages:
        return matmul.stages_mode(args, blas)
    if (args.shapes or args.conv) and args.dtype != "f32":
        return low_precision.mode(args)
    if args.shapes:
        return matmul.shapes_mode(args, blas)
    if args.ablation:
        return matmul.ablation_mode(args, blas)
    if args.compile:
        return compile_time.compile_mode(args, blas)
    if args.conv:
        return conv.conv_mode(args, blas)
    if args.fusion:
        return fusion.fusion_mode(args, blas)
    if args.model:
        return models.model_mode(args)
    return common.peak_mode(args)


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


entry = console_entry(main)


if __name__ == "__main__":
    sys.exit(entry())

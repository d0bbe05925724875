"""loom-bench --shapes, --ablation and --plot, in-process (tools.loom_bench.main) with tiny
shapes and budgets. Speed is never asserted: only that rows come, check and print."""

import json
import os
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import threadpoolctl

from compiler.driver import compile
from compiler.measure import peak, runner
from passes.schedule import loom_default
from tools import loom_bench
from tools.bench import common, compile_time, low_precision
from tools.bench import matmul as bench

FAST = ["--budget", "0.01", "--repeat", "3"]
#: a schedule that exists whether or not the `default` pipeline does
IKJ = "loom-interchange{order=0,2,1 op=matmul}"


@pytest.fixture(autouse=True)
def _restore_blas_setup(monkeypatch):
    """main() sets numpy up for timing (tools.numpy_env): one BLAS thread, OpenBLAS
    overrides dropped. Undo both after each test, for the rest of the suite."""
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if var in os.environ:
            monkeypatch.setenv(var, os.environ[var])
    with threadpoolctl.threadpool_limits(None):
        yield


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize("text, shape", [
    ("8", (8, 8, 8)), (" 64 ", (64, 64, 64)), ("128x768x3072", (128, 768, 3072)),
    ("1X4096x4096", (1, 4096, 4096)), ("3x5x7", (3, 5, 7)),
])
def test_parse_shape(text, shape):
    assert loom_bench.parse_shape(text) == shape


@pytest.mark.parametrize("text, why", [
    ("12x", "expected N or MxNxK"), ("x", "expected N or MxNxK"), ("1x2", "expected N or MxNxK"),
    ("1x2x3x4", "expected N or MxNxK"), ("axbxc", "expected N or MxNxK"), ("", "expected N or MxNxK"),
    ("2.5", "expected N or MxNxK"), ("0", "at least 1"), ("4x0x4", "at least 1"), ("-3", "at least 1"),
])
def test_parse_shape_rejects(text, why):
    with pytest.raises(ValueError, match=why):
        loom_bench.parse_shape(text)


def test_parse_shapes_list_and_defaults():
    assert loom_bench.parse_shapes("8,3x5x7") == [(8, 8, 8), (3, 5, 7)]
    # the tool writes the defaults out (it parses before numpy is imported): the same lists
    assert loom_bench.parse_shapes(loom_bench.SHAPES) == bench.SHAPES
    assert loom_bench.parse_shapes(loom_bench.ABLATION_SHAPES) == bench.ABLATION_SHAPES
    assert loom_bench.parse_shapes(loom_bench.DTYPE_SHAPES) == low_precision.DTYPE_SHAPES
    from tools.bench import models as bench_model  # (imports no torch)

    assert loom_bench.MODELS == bench_model.MODELS
    assert common.shape_label((128, 768, 3072)) == "128x768x3072"


@pytest.mark.parametrize("argv, message", [
    (["--shapes", "--shapes-list", "12x"], "--shapes-list: bad shape '12x'"),
    (["--shapes", "--shapes-list", "8,,9"], "bad shape ''"),
    (["--ablation", "--shapes-list", "0"], "every dimension must be at least 1"),
    (["--stages", "--pipeline", "naive"], "--pipeline applies to --shapes and --compile only"),
    (["--conv", "--transposed"], "--transposed applies to --shapes only"),
    (["--shapes", "--chain", "5"], "--chain applies to --compile only"),
    (["--stages", "--matmul", "8"], "--matmul applies to --compile only"),
    (["--ablation", "--examples", "x.mlir"], "--examples applies to --compile only"),
    (["--compile", "--chain", "0"], "--chain lengths must be at least 1"),
    (["--compile", "--chain", "5,x"], "--chain must be comma-separated integers, got '5,x'"),
    (["--compile", "--matmul", "8x8"], "--matmul: bad shape '8x8'"),
    (["--compile", "--examples", "/nonexistent/k.mlir"], "--examples: cannot read /nonexistent/k.mlir"),
    (["--compile", "--shapes"], "not allowed with argument"),
    (["--ablation", "--plot", "x.png"], "--plot applies to --shapes and --conv only"),
    (["--stages", "--shapes-list", "8"], "--shapes-list applies to --shapes and --ablation only"),
    (["--shapes", "--sizes", "8"], "--sizes applies to --stages only"),
    (["--ablation", "--rounds", "3"], "--rounds applies to --shapes and --conv and --fusion and --model only"),
    (["--shapes", "--rounds", "0"], "--repeat, --budget, --rounds and --threads must be positive"),
    (["--shapes", "--ablation"], "not allowed with argument"),
    (["--stages", "--threads", "2"], "--threads applies to --shapes and --conv only"),
    (["--shapes", "--layers", "resnet"], "--layers applies to --conv only"),
    (["--shapes", "--layout", "nhwc"], "--layout applies to --conv only"),
    (["--conv", "--layers", "vgg"], "invalid choice: 'vgg'"),
    (["--model", "alexnet"], "--model: unknown model alexnet (expected resnet18, resnet50, vgg11, regnet_y_400mf, mobilenet_v2, mlp)"),
    (["--model", "mlp", "--batches", "0"], "--batches must be comma-separated positive integers"),
    (["--model", "mlp", "--threads-list", "x"], "--threads-list must be comma-separated positive integers"),
    (["--shapes", "--batches", "2"], "--batches applies to --model only"),
    (["--shapes", "--threads", "0"], "--repeat, --budget, --rounds and --threads must be positive"),
    (["--stages", "--dtype", "int8"], "--dtype applies to --shapes and --conv and --model only"),
    (["--model", "mlp", "--dtype", "int8"], "--model runs f32 or bf16 models: --dtype int8 applies to"),
    (["--stages", "--peers"], "--peers applies to --shapes and --conv and --model only"),
    (["--conv", "--dtype", "bf16", "--plot", "x.png"], "--dtype bf16 has no plot: drop --plot"),
    (["--conv", "--requantize"], "--requantize quantizes int8 layers: add --dtype int8"),
    (["--shapes", "--freeze"], "--freeze applies to --model only"),
    (["--conv", "--profile"], "--profile applies to --model only"),
    (["--model", "mlp", "--dtype", "s8"], "--model runs f32 or bf16 models: --dtype s8 applies to"),
    (["--shapes", "--dtype", "int8", "--requantize"], "--requantize applies to --conv only"),
    (["--shapes", "--dtype", "f16"], "invalid choice: 'f16'"),
    (["--shapes", "--dtype", "bf16", "--plot", "x.png"], "--dtype bf16 has no plot: drop --plot"),
    ([], "nothing to do"),
])
def test_argument_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        loom_bench.main(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_matmul_source_shapes():
    src = common.matmul_source(3, 5, 7)
    assert "func.func @matmul(%a: tensor<3x7xf32>, %b: tensor<7x5xf32>) -> tensor<3x5xf32>" in src
    assert "loom.matmul %a, %b : (tensor<3x7xf32>, tensor<7x5xf32>) -> tensor<3x5xf32>" in src
    assert common.matmul_source(4) == common.matmul_source(4, 4, 4)


def test_compile_fresh_is_not_a_cache_hit():
    src = common.matmul_source(2, 3, 4)
    k1, _ = common.compile_fresh(src, "naive")
    k2, _ = common.compile_fresh(src, "naive")
    assert k1 is not k2


# --------------------------------------------------------------------------- --shapes


def test_shapes_table(capsys):
    assert loom_bench.main(["--shapes", "--shapes-list", "3x5x7,8", "--pipeline", "naive", *FAST]) == 0
    out, err = capsys.readouterr()
    assert "numpy BLAS:" in out and "pipeline: naive" in out
    assert ("| shape M×N×K | Loom GFLOP/s | numpy GFLOP/s | loom/numpy | torch GFLOP/s | compile s | check |"
            in out)
    lines = [line for line in out.splitlines() if line.startswith(("| 3x5x7 |", "| 8x8x8 |"))]
    assert len(lines) == 2 and all(line.endswith("| ok |") for line in lines)
    assert "3x5x7" in err and "8x8x8" in err  # progress, as rows come


def test_shapes_rounds(capsys):
    """--rounds 3: each round's loom/numpy is kept; the table's ratio is their median and a
    column gives their range; the times are the medians over the rounds."""
    assert loom_bench.main(["--shapes", "--shapes-list", "6x7x8", "--pipeline", "naive", "--rounds", "3", *FAST]) == 0
    out, err = capsys.readouterr()
    assert "| loom/numpy | loom/numpy min-max (3 rounds) | torch GFLOP/s |" in out
    (line,) = [x for x in out.splitlines() if x.startswith("| 6x7x8 |")]
    cells = [c.strip() for c in line.split("|")[1:-1]]
    low, high = (float(x) for x in cells[4].split("-"))
    assert low <= float(cells[3]) <= high and cells[-1] == "ok"
    assert "over 3 rounds" in err
    rows = bench.run_shapes([(4, 5, 6)], pipeline="naive", repeat=3, budget=0.01, rounds=4)
    (row,) = rows
    ordered = sorted(row.ratios)
    assert len(ordered) == 4 and row.ratio == pytest.approx((ordered[1] + ordered[2]) / 2)  # their median
    assert bench.shapes_json(rows)[0]["ratios"] == list(row.ratios)


def test_shapes_threads(capsys):
    """--threads 2: Loom compiled for 2 threads beside numpy on 2, and Loom's one-thread
    kernel timed in the same rounds: its GFLOP/s and the speedup in two more columns."""
    assert loom_bench.main(["--shapes", "--shapes-list", "256", "--threads", "2", *FAST]) == 0
    out, err = capsys.readouterr()
    assert "threads=2" in out and "pipeline: default, threads: 2" in out
    assert "| loom/numpy | Loom 1 thread GFLOP/s | speedup | torch GFLOP/s |" in out
    (line,) = [x for x in out.splitlines() if x.startswith("| 256x256x256 |")]
    cells = [c.strip() for c in line.split("|")[1:-1]]
    assert float(cells[4]) > 0 and cells[5].endswith("x") and cells[-1] == "ok"
    assert "Loom's one thread" in err
    (row,) = bench.run_shapes([(256, 256, 256)], repeat=3, budget=0.01, threads=2)
    assert row.threads == 2 and row.speedup == pytest.approx(row.one_thread_seconds / row.seconds)
    assert bench.shapes_json([row])[0]["speedup"] == row.speedup


def test_shapes_transposed(capsys):
    """--transposed: B is W.T for an N x K array W, for Loom (passed W, a strided view to
    the kernel, never copied) and numpy alike; the check compares with W.T's product."""
    assert loom_bench.main(["--shapes", "--shapes-list", "20x33x40", "--transposed", *FAST]) == 0
    out, _ = capsys.readouterr()
    assert "pipeline: default, threads: 1, B = W.T (x @ w.T, W an N x K array)" in out
    (line,) = [x for x in out.splitlines() if x.startswith("| 20x33x40 |")]
    assert line.endswith("| ok |")
    (row,) = bench.run_shapes([(20, 33, 40)], repeat=3, budget=0.01, transposed=True)
    assert row.ok and row.transposed and bench.shapes_json([row])[0]["transposed"] is True
    problem = bench._Problem((3, 5, 7), np.random.default_rng(0), transposed=True)
    assert problem.b_arg.shape == (5, 7) and problem.b.base is problem.b_arg  # a view, no copy
    assert "loom.transpose %w" in common.matmul_source(3, 5, 7, transposed=True)


def test_shapes_json_with_a_pass_list(capsys):
    assert loom_bench.main(["--shapes", "--shapes-list", "4x6x9", "--pipeline", IKJ, "--json", *FAST]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"machine", "blas", "rows"} and data["blas"].startswith("numpy BLAS:")
    (row,) = data["rows"]
    assert row["shape"] == [4, 6, 9] and row["pipeline"] == IKJ and row["ok"] is True
    assert set(row) == {"shape", "pipeline", "seconds", "gflops", "numpy_seconds", "numpy_gflops", "ratio",
                        "torch_seconds", "torch_gflops", "max_err", "bound", "ok", "compile_seconds", "ratios",
                        "threads", "one_thread_seconds", "speedup", "transposed", "peers"}
    assert row["peers"] == {}  # (ONNX Runtime and OpenVINO with --peers)
    assert row["ratio"] == pytest.approx(row["numpy_seconds"] / row["seconds"]) and row["ratios"] == []
    assert row["max_err"] <= row["bound"] and row["compile_seconds"] > 0
    if "torch" not in sys.modules:
        assert row["torch_seconds"] is None and row["torch_gflops"] is None


def test_shapes_mismatch_exits_1(monkeypatch, capsys):
    """A wrong result (the bound forced below any error) makes the row MISMATCH, exit 1."""
    monkeypatch.setattr(bench, "error_bound", lambda *args: -1.0)
    assert loom_bench.main(["--shapes", "--shapes-list", "3", "--pipeline", "naive", *FAST]) == 1
    out, err = capsys.readouterr()
    assert "| 3x3x3 |" in out and out.rstrip().endswith("| MISMATCH |") and "MISMATCH" in err


def test_torch_column(monkeypatch, tmp_path, capsys):
    """With torch importable (a stand-in on numpy here), its column is filled and plotted."""
    import numpy as np

    threads = []
    fake = types.SimpleNamespace(set_num_threads=threads.append, from_numpy=lambda a: a, matmul=np.matmul)
    monkeypatch.setitem(sys.modules, "torch", fake)
    argv = ["--shapes", "--shapes-list", "5", "--pipeline", "naive", *FAST]
    if bench_plot := _has_matplotlib():
        argv += ["--plot", str(tmp_path / "torch.png")]
    assert loom_bench.main(argv) == 0
    out, err = capsys.readouterr()
    (line,) = [x for x in out.splitlines() if x.startswith("| 5x5x5 |")]
    assert line.split("|")[5].strip() != "-" and "torch" in err and threads == [1]
    assert not bench_plot or (tmp_path / "torch.png").stat().st_size > 0


@pytest.mark.parametrize("dtype, unit", [("bf16", "GFLOP/s"), ("int8", "GOP/s"), ("s8", "GOP/s")])
def test_low_precision_shapes(dtype, unit, monkeypatch, capsys):
    """--dtype: Loom's kernel of the type beside its f32 kernel (torch hidden: its columns are
    absent), checked (int8 exactly), a share of the type's peak; a wrong result exits 1."""
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch fails
    monkeypatch.setattr(low_precision, "peak_gflops", lambda dtype, threads=1: 100.0)
    argv = ["--shapes", "--dtype", dtype, "--shapes-list", "3x5x7,17", "--pipeline", "naive", *FAST]
    assert loom_bench.main(argv) == 0
    out, err = capsys.readouterr()
    assert f"{dtype} peak: 100.0 {unit} on {peak.dot_path(low_precision.PEAK_TYPES.get(dtype, dtype)).describe()}" in out
    assert (f"| shape M×N×K | Loom {dtype} {unit} | Loom f32 GFLOP/s | {dtype}/f32 | Loom/fastest peer | "
            "share of peak | check |") in out
    rows = [line for line in out.splitlines() if line.startswith(("| 3x5x7 |", "| 17x17x17 |"))]
    assert len(rows) == 2 and all(row.endswith("| ok |") and "| - |" in row for row in rows), rows
    assert "3x5x7" in err and "17x17x17" in err
    assert loom_bench.main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(r["label"], r["ops"]) for r in data["rows"]] == [("3x5x7", 210), ("17x17x17", 2 * 17**3)]
    assert all(r["ok"] and r["dtype"] == dtype and r["peers"] == {} for r in data["rows"])
    assert all(r["bound"] == 0 for r in data["rows"]) == (dtype != "bf16")
    real = low_precision.Problem

    def wrong(*args):  # the reference off by one in a corner: the row is a MISMATCH
        problem = real(*args)
        problem.want[0, 0] += 1
        return problem

    assert loom_bench.main([*argv, "--transposed"]) == 0  # x @ w.T, W passed: the same checks
    out = capsys.readouterr().out
    assert "B = W.T (x @ w.T" in out and sum(line.endswith("| ok |") for line in out.splitlines()) == 2
    monkeypatch.setattr(low_precision, "Problem", wrong)
    assert loom_bench.main(["--shapes", "--dtype", dtype, "--shapes-list", "4", *FAST]) == 1
    assert capsys.readouterr().out.rstrip().endswith("| MISMATCH |")


#: two small layers for --conv --dtype: a padded 3x3, a strided one of two images
TINY_LAYERS = {"3x3 C3 6x6": (1, 3, 6, 6, 4, 3, 3, (1, 1), (1, 1), (1, 1)),
               "3x3/2 C2 N2": (2, 2, 7, 5, 3, 3, 3, (2, 2), (1, 1), (1, 1))}


@pytest.mark.parametrize("dtype, layout", [("bf16", "nchw"), ("int8", "nhwc")])
def test_low_precision_conv(dtype, layout, monkeypatch, capsys):
    """--conv --dtype: each layer's kernel of the type beside its f32 kernel, checked (int8
    exactly), in either layout, as a table and as JSON (torch hidden)."""
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setattr(low_precision, "peak_gflops", lambda dtype, threads=1: 100.0)
    monkeypatch.setitem(low_precision.LAYERS, "all", TINY_LAYERS)
    argv = ["--conv", "--dtype", dtype, "--layout", layout, *FAST]
    assert loom_bench.main(argv) == 0
    out = capsys.readouterr().out
    assert f"pipeline: default, threads: 1, {layout.upper()}" in out and f"| layer | Loom {dtype} " in out
    rows = [line for line in out.splitlines() if line.startswith(tuple(f"| {name} |" for name in TINY_LAYERS))]
    assert len(rows) == 2 and all(row.endswith("| ok |") for row in rows), rows
    assert loom_bench.main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(r["label"], r["ops"]) for r in data["rows"]] == [("3x3 C3 6x6", 2 * 4 * 36 * 27),
                                                              ("3x3/2 C2 N2", 2 * 2 * 3 * 4 * 3 * 18)]
    assert all(r["ok"] and (r["bound"] == 0) == (dtype == "int8") for r in data["rows"])


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_requantized_conv(layout, monkeypatch, capsys):
    """--conv --dtype int8 --requantize: each layer quantized (u8 out), one fused kernel,
    bit for bit Loom's numpy reference, in either layout (torch hidden)."""
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setattr(low_precision, "peak_gflops", lambda dtype, threads=1: 100.0)
    monkeypatch.setitem(low_precision.LAYERS, "all", TINY_LAYERS)
    argv = ["--conv", "--dtype", "int8", "--requantize", "--layout", layout, *FAST]
    assert loom_bench.main(argv) == 0
    out = capsys.readouterr().out
    assert "each layer quantized: (conv2d + i32 bias) x scales, requantized to uint8 in the kernel" in out
    rows = [line for line in out.splitlines() if line.startswith(tuple(f"| {name} |" for name in TINY_LAYERS))]
    assert len(rows) == 2 and all(row.endswith("| ok |") for row in rows), rows
    problem = low_precision.RequantizedConvProblem("3x3 C3 6x6", TINY_LAYERS["3x3 C3 6x6"], np.random.default_rng(0),
                                                   layout)
    assert problem.a.max() < 128 and 0 <= problem.want.min() and 0 < problem.want.max() <= 255
    kernel = compile(problem.source(low_precision.TYPES["int8"]), pipeline="default", remarks=True)
    assert np.array_equal(kernel(*problem.args()), problem.want)
    assert any("[loom-fuse-epilogue] fused add (line 3), dequantize (line 4), quantize (line 5) into" in r
               for r in kernel.remarks), kernel.remarks  # (one nest)


@pytest.mark.parametrize("transposed", [False, True])
def test_low_precision_peers_compute_the_same_product(transposed):
    """torch's kernels, where installed, compute the product the row times (int8: `_int_mm`
    on A shifted to s8, s8: on A as it is, the dynamically quantized Linear within its
    quantization error);
    `transposed`: B is W.T, W the argument (x @ w.T)."""
    torch = pytest.importorskip("torch")
    for dtype in ("bf16", "int8", "s8"):
        problem = low_precision.Problem((24, 16, 32), dtype, np.random.default_rng(0), transposed)
        assert problem.b.shape == ((16, 32) if transposed else (32, 16))
        peers = low_precision.torch_peers(problem, 1)
        if dtype == "bf16":
            got = peers["torch bf16 matmul"]().float().numpy()
            np.testing.assert_allclose(got, problem.want, rtol=1e-2, atol=0.1)
            continue
        signed = problem.a.astype(np.int64) - (128 if dtype == "int8" else 0)  # (s8: A as it is)
        np.testing.assert_array_equal(peers["torch _int_mm"]().numpy(), signed @ problem.matrix(problem.b).astype(np.int64))
        linear = peers["torch dynamic int8 Linear"]().numpy()
        assert np.abs(linear - problem.want).max() <= 0.02 * np.abs(problem.want).max()
    for layout in ("nchw", "nhwc"):  # torch's bf16 conv2d; no int8 peer
        problem = low_precision.ConvProblem("c", TINY_LAYERS["3x3/2 C2 N2"], "bf16", np.random.default_rng(1), layout)
        got = low_precision.torch_peers(problem, 1)["torch bf16 conv2d"]().float()
        got = (got.permute(0, 2, 3, 1) if layout == "nhwc" else got).numpy()
        np.testing.assert_allclose(got, problem.want, rtol=1e-2, atol=0.1)
        assert low_precision.torch_peers(low_precision.ConvProblem(
            "c", TINY_LAYERS["3x3/2 C2 N2"], "int8", np.random.default_rng(1), layout), 1) == {}
    torch.set_num_threads(1)


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def test_unknown_pipeline_is_a_clean_error(capsys):
    assert loom_bench.main(["--shapes", "--shapes-list", "3", "--pipeline", "nosuch", *FAST]) == 1
    assert "invalid pass pipeline 'nosuch'" in capsys.readouterr().err


MODES = {"--stages": (bench, "run_stages", ["--sizes", "4"]), "--shapes": (bench, "run_shapes", ["--shapes-list", "4"]),
         "--ablation": (bench, "run_ablation", ["--shapes-list", "4"]),
         "--compile": (compile_time, "run_compile", ["--chain", "1", "--matmul", "none", "--examples", "none"])}


def _failing(error: BaseException):
    def run(*args, **kwargs):
        raise error
    return run


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("error, line", [
    (MemoryError("@f: cannot allocate the temporary %t (memref<100000x100000xf32>, 37.3 GiB)"),
     "loom-bench: error: @f: cannot allocate the temporary %t (memref<100000x100000xf32>, 37.3 GiB)"),
    (ValueError("@f argument #0 (%a) has shape (3,), expected (4,)"),
     "loom-bench: error: @f argument #0 (%a) has shape (3,), expected (4,)"),
    (TypeError("@f takes 2 arrays, got 1"), "loom-bench: error: @f takes 2 arrays, got 1"),
    (MemoryError(), "loom-bench: error: out of memory"),
    (KeyError("a bug"), "loom-bench: error: internal compiler error: KeyError: 'a bug'"),
], ids=["MemoryError", "ValueError", "TypeError", "bare MemoryError", "internal"])
def test_errors_are_one_line_in_every_mode(mode, error, line, monkeypatch, capsys):
    """Bad input and bugs end in one line and exit status 1, as in loom-run (a MemoryError
    or a ValueError was a traceback)."""
    module, function, argv = MODES[mode]
    monkeypatch.setattr(module, function, _failing(error))
    monkeypatch.delenv("LOOM_DEBUG", raising=False)
    assert loom_bench.main([mode, *argv, *FAST]) == 1
    out, err = capsys.readouterr()
    assert err.splitlines()[-1] == line and "Traceback" not in err


def test_located_errors_and_loom_debug(monkeypatch, capsys, tmp_path):
    """A located LoomError prints as it is; LOOM_DEBUG lets an internal error out."""
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @f() {\n  %x = loom.nosuch\n}\n")
    argv = ["--compile", "--examples", str(bad), "--chain", "1", "--matmul", "none", "--pipeline", "naive"]
    assert loom_bench.main(argv) == 1
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith(f"{bad}:") and last.endswith(": error: Operation loom.nosuch is not registered")
    monkeypatch.setattr(compile_time, "run_compile", _failing(KeyError("a bug")))
    monkeypatch.setenv("LOOM_DEBUG", "1")
    with pytest.raises(KeyError):
        loom_bench.main(argv)


def test_disk_hit_reports_a_miss_then_hits():
    """`loom-bench --compile`'s disk cache probe: the first fresh process compiles and
    stores, the next finds what it stored on disk; each times import, compile() and one
    call, and is checked. The start-up rows come from the hits: each beside its target."""
    result = compile_time.disk_hit((8, 16, 24), hits=1)
    stored = result["miss"]["stats"]["stored"]
    assert result["ok"] and stored >= 1 and result["miss"]["stats"] == {"miss": stored, "stored": stored}
    (hit,) = result["hits"]
    assert hit["stats"] == {"hit": stored}
    assert all(r[what] > 0 for r in (result["miss"], hit) for what in ("import", "compile", "call"))
    text = compile_time.markdown_disk_hit(result)
    assert "| process | import compiler (ms) | compile() (ms) | one call (ms) | end to end (ms) | disk cache |" in text
    assert "| first |" in text and "| then 1 |" in text and "a hit: median" in text
    (line,) = [x for x in text.splitlines() if x.startswith("| then 1 |")]
    cells = [c.strip() for c in line.split("|")[1:-1]]
    assert float(cells[4]) == pytest.approx(sum(float(c) for c in cells[1:4]), abs=0.2) and cells[5] == f"hit {stored}"
    figures = compile_time.startup(result)
    assert figures == {"runs": 1, "kernel": "matmul 8x16x24", "import": hit["import"], "import_target": 0.2,
                       "served": hit["import"] + hit["compile"] + hit["call"], "served_target": 0.3}
    table = compile_time.markdown_startup(figures).splitlines()
    assert table[:3] == ["start-up, wall seconds in a fresh process (median of 1):", "| start-up | seconds | target |",
                         "|---|---:|---:|"]
    assert table[3] == f"| import compiler | {hit['import']:.3f} | ≤ 0.2 |"
    assert table[4] == (f"| matmul 8x16x24 from the disk cache, end to end (import, compile(), one call) "
                        f"| {figures['served']:.3f} | ≤ 0.3 |")


def test_startup_is_the_median_of_the_hits():
    """The start-up figures are medians over the processes that found the kernel on disk
    (the first process, which compiled it, is not one)."""
    def run(imported, compiled, called):
        return {"import": imported, "compile": compiled, "call": called, "stats": {"hit": 1}, "ok": True}

    result = {"shape": [4, 4, 4], "miss": run(9.0, 9.0, 9.0), "ok": True,
              "hits": [run(0.5, 0.25, 0.25), run(0.125, 0.125, 0.25), run(0.25, 0.5, 0.5)]}
    figures = compile_time.startup(result)
    assert (figures["runs"], figures["import"], figures["served"]) == (3, 0.25, 1.0)
    assert "| matmul 4x4x4 from the disk cache, end to end (import, compile(), one call) | 1.000 | ≤ 0.3 |" in (
        compile_time.markdown_startup(figures))


@pytest.mark.parametrize("probe, message", [
    ('print(\'{"error": "MemoryError: Unable to allocate 4.0 GiB"}\')', ": MemoryError: Unable to allocate 4.0 GiB"),
    ("raise KeyError('a bug')", ", failed (exit status 1): KeyError: 'a bug'"),
])
def test_fresh_process_failures_are_one_line(probe, message, monkeypatch, capsys):
    """The matmul's fresh process reports a user error, or dies: one line either way (its
    whole stderr, a traceback, was printed)."""
    monkeypatch.setattr(compile_time, "_COLD_PROBE", probe)
    assert loom_bench.main(["--compile", "--chain", "1", "--examples", "none", "--matmul", "2"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == "loom-bench: error: the matmul 2x2x2, compiled in a fresh process" + message
    assert "Traceback" not in err


def test_unwritable_plot_is_a_clean_error(capsys):
    pytest.importorskip("matplotlib")
    argv = ["--shapes", "--shapes-list", "3", "--pipeline", "naive", "--plot", "/nonexistent/dir/p.png", *FAST]
    assert loom_bench.main(argv) == 1
    err = capsys.readouterr().err
    assert "loom-bench: error: cannot write the plot /nonexistent/dir/p.png: No such file or directory" in err


# --------------------------------------------------------------------------- --ablation

PIPELINES = {None: f"{IKJ},loom-hoist", "interchange": "loom-hoist", "hoist": IKJ}


def test_ablation_with_injected_steps():
    got = []
    rows = bench.run_ablation([(5, 6, 7), (8, 8, 8)], steps=("interchange", "hoist"), pipeline_for=PIPELINES.get,
                              repeat=3, budget=0.01, on_row=got.append)
    assert got == rows
    assert [(r.m.shape, r.variant, r.m.pipeline) for r in rows] == [
        (shape, variant, PIPELINES[step]) for shape in [(5, 6, 7), (8, 8, 8)]
        for variant, step in [("default", None), ("default - interchange", "interchange"), ("default - hoist", "hoist")]
    ]
    assert all(r.ok for r in rows) and rows[0].slowdown == 1.0 and rows[3].slowdown == 1.0
    table = bench.markdown_ablation(rows)
    assert "| shape | variant | GFLOP/s | loom/numpy | slowdown vs default | check |" in table
    assert "| 5x6x7 | default | " in table and "| 8x8x8 | default - hoist | " in table
    assert "| 1.00x | ok |" in table
    data = bench.ablation_json(rows)
    assert data[1]["variant"] == "default - interchange" and data[1]["shape"] == [5, 6, 7]
    assert data[1]["slowdown"] == pytest.approx(rows[1].m.seconds / rows[0].m.seconds)


def test_ablation_command_line(monkeypatch, capsys):
    """The CLI's steps come from passes.schedule.loom_default and its pipelines from
    bench.default_minus: both stand-ins here."""
    monkeypatch.setattr(loom_default, "MATMUL_STEPS", ("interchange", "hoist"))
    monkeypatch.setattr(bench, "default_minus", PIPELINES.get)
    assert loom_bench.main(["--ablation", "--shapes-list", "6", *FAST]) == 0
    out = capsys.readouterr().out
    assert "| 6x6x6 | default | " in out and "| 6x6x6 | default - interchange | " in out
    assert loom_bench.main(["--ablation", "--shapes-list", "6", "--json", *FAST]) == 0
    assert [r["variant"] for r in json.loads(capsys.readouterr().out)["rows"]] == [
        "default", "default - interchange", "default - hoist"]


def test_default_minus():
    assert bench.default_minus(None) == "default"
    assert bench.default_minus("pack") == "loom-default{skip=pack}"


# --------------------------------------------------------------------------- --plot


def test_plot_writes_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "shapes.png"
    assert loom_bench.main(["--shapes", "--shapes-list", "3x5x7,8", "--pipeline", "naive", "--plot", str(png),
                            *FAST]) == 0
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000


def test_plot_without_matplotlib(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    png = tmp_path / "shapes.png"
    assert loom_bench.main(["--shapes", "--shapes-list", "3", "--pipeline", "naive", "--plot", str(png)]) == 1
    out, err = capsys.readouterr()
    assert err.strip() == "loom-bench: error: " + common.MATPLOTLIB_MISSING
    assert "pip install 'loomir[bench]'" in err and "Traceback" not in err
    assert out == "" and not png.exists()  # refused before the benchmark ran


# --------------------------------------------------------------------------- --compile

EXAMPLE = str(Path(__file__).resolve().parents[1] / "examples" / "matmul.mlir")


def test_compile_json(capsys):
    """A chain, an example and a tiny matmul (cold and warm, in a fresh process, with the
    import's time): each row's stages are parse+verify, set-up, the pipeline's passes, the
    final verify, LLVM emission, LLVM's parse, O3 and machine code; every kernel is
    checked."""
    from passes.pipelines import complete

    argv = ["--compile", "--chain", "3", "--matmul", "8", "--examples", EXAMPLE, "--pipeline", "naive", "--json"]
    assert loom_bench.main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    rows = data["rows"]
    assert [r["name"] for r in rows] == [EXAMPLE, "chain of 3 adds", "matmul 8x8x8 (cold)", "matmul 8x8x8 (warm)"]
    assert [r["pipeline"] for r in rows] == ["naive", "naive", "default", "default"]
    for row in rows:
        passes = complete(row["pipeline"]).split(",")
        assert list(row["stages"]) == ["parse+verify", "set-up", *passes, "verify", "LLVM emission", "LLVM parse",
                                       "LLVM O3", "machine code"]
        assert row["ok"] and row["cpu"] == pytest.approx(sum(s["cpu"] for s in row["stages"].values()))
        assert all(s["cpu"] >= 0 and s["wall"] >= 0 for s in row["stages"].values())
    assert data["import"]["cpu"] > 0 and data["import"]["wall"] > 0
    assert data["pipeline"] == "naive" and "machine" in data
    disk, startup = data["disk_cache"], data["startup"]
    assert disk["ok"] and len(disk["hits"]) == 5 and all(r["call"] > 0 for r in disk["hits"])
    assert startup == compile_time.startup(disk) and startup["runs"] == 5 and startup["kernel"] == "matmul 8x8x8"
    assert (startup["import_target"], startup["served_target"]) == (0.2, 0.3)


def test_compile_table(capsys):
    assert loom_bench.main(["--compile", "--chain", "2,4", "--matmul", "none", "--examples", EXAMPLE,
                            "--pipeline", "naive"]) == 0
    out, err = capsys.readouterr()
    assert f"| stage (CPU s) | {EXAMPLE} | chain of 2 adds | chain of 4 adds |" in out
    for stage in ("parse+verify", "loom-lower-affine", "LLVM emission", "LLVM O3", "machine code", "check"):
        assert f"| {stage} |" in out
    assert "| check | ok | ok | ok |" in out and "import compiler" not in out and "start-up" not in out
    assert "chain of 4 adds" in err  # progress, as rows come


def test_timed_compile_names_a_repeated_pass():
    timings = {}
    compile(common.matmul_source(4), pipeline=f"{IKJ},{IKJ}", timings=timings)
    assert "loom-interchange" in timings and "loom-interchange#2" in timings


def test_timed_compile_is_the_kernel_checked(monkeypatch):
    """--compile compiles each kernel once: the compile it times is the one it checks
    (the 1,000-op chain was compiled twice, once to time, once to check)."""
    calls = []
    monkeypatch.setattr(runner, "compile", lambda *a, **k: calls.append(k.get("timings")) or compile(*a, **k))
    row = compile_time.checked_compile("chain", compile_time.chain_source(3), "naive")
    assert len(calls) == 1 and calls[0] is row.stages and row.ok
    assert list(row.stages)[:2] == ["parse+verify", "set-up"] and "machine code" in row.stages


def test_timed_compile_is_never_a_cache_hit():
    """compile(timings=...) times a real compile: it neither uses nor fills the cache."""
    source = compile_time.chain_source(2)
    cached = compile(source)
    timings = {}
    timed = compile(source, timings=timings)
    assert timed is not cached and compile(source) is cached and "LLVM O3" in timings


def test_compile_unknown_pipeline_is_a_clean_error(capsys):
    assert loom_bench.main(["--compile", "--chain", "2", "--matmul", "none", "--examples", EXAMPLE,
                            "--pipeline", "nosuch"]) == 1
    assert "invalid pass pipeline 'nosuch'" in capsys.readouterr().err


def test_chain_source():
    src = compile_time.chain_source(3, shape=(2, 5), dtype="f64")
    assert src.startswith("func.func @chain(%x0: tensor<2x5xf64>, %b: tensor<2x5xf64>) -> tensor<2x5xf64> {")
    assert "%x3 = loom.add %x2, %b : (tensor<2x5xf64>, tensor<2x5xf64>) -> tensor<2x5xf64>" in src
    assert src.count("loom.add") == 3 and "func.return %x3" in src


def test_conv_command_line(monkeypatch, capsys, tmp_path):
    """--conv: each layer checked and timed beside numpy's im2col + matmul (and torch when
    installed); tiny stand-in layers here. numpy's im2col by hand is the reference's twin."""
    from tools.bench import conv as bench_conv

    layers = {"tiny 3x3/2": (2, 3, 9, 8, 5, 3, 3, (2, 2), (1, 1), (1, 1)),
              "tiny 1x1": (1, 4, 5, 5, 6, 1, 1, (1, 1), (0, 0), (1, 1))}
    monkeypatch.setitem(bench_conv.LAYERS, "resnet", layers)
    assert loom_bench.main(["--conv", "--layers", "resnet", *FAST]) == 0
    out = capsys.readouterr().out
    assert "| tiny 3x3/2 | 2×3×9×8, 5×3×3, 2, 1, 1 | direct | " in out and "| tiny 1x1 | 1×4×5×5, 6×1×1, 1, 0, 1 | im2col | " in out
    assert out.count("| ok |") == 2 and "f32, NCHW" in out
    plot = ["--plot", str(tmp_path / "conv.png")] if _has_matplotlib() else []
    assert loom_bench.main(["--conv", "--layers", "resnet", "--layout", "nhwc", *FAST, *plot]) == 0
    assert not plot or (tmp_path / "conv.png").stat().st_size > 0
    out = capsys.readouterr().out
    assert "f32, NHWC" in out and "| tiny 3x3/2 | 2×3×9×8, 5×3×3, 2, 1, 1 | direct | " in out and out.count("| ok |") == 2
    from compiler.numpy_reference import conv2d_nchw, conv2d_nhwc

    rng = np.random.default_rng(0)
    for layer in layers.values():
        params = layer[7:]
        x_shape, w_shape, _ = bench_conv.layer_shapes(layer)
        x, wt = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
        np.testing.assert_allclose(bench_conv.numpy_im2col(x, wt, *params), conv2d_nchw(x, wt, *params), rtol=1e-12, atol=1e-12)
        x_shape, w_shape, _ = bench_conv.layer_shapes(layer, "nhwc")
        x, wt = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
        np.testing.assert_allclose(bench_conv.numpy_im2col_nhwc(x, wt, *params), conv2d_nhwc(x, wt, *params),
                                   rtol=1e-12, atol=1e-12)

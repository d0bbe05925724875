"""`loom-bench --peers` (tools/bench/peers.py): ONNX Runtime and OpenVINO as peers. Without
them (the `anchors` extra) the bench says so and times the rest; with them, each one-node
graph computes the product or convolution it is timed for (checked here against numpy)."""

import json
import sys

import numpy as np
import pytest

from compiler.numpy_reference import conv2d_nchw
from tools import loom_bench
from tools.bench import low_precision, peers

FAST = ["--budget", "0.01", "--repeat", "2", "--pipeline", "naive"]


def test_without_the_runtimes(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails
    monkeypatch.setitem(sys.modules, "openvino", None)
    monkeypatch.setitem(sys.modules, "torch", None)
    assert peers.versions() == {"onnxruntime": None, "openvino": None}
    assert "ONNX Runtime: not installed (pip install 'loomir[anchors]')" in peers.header()
    a = np.ones((3, 4), np.float32)
    assert peers.kernel_peers("matmul", a, a.T.copy(), "f32", 1) == []
    assert loom_bench.main(["--shapes", "--shapes-list", "5x3x4", "--peers", *FAST]) == 0
    out = capsys.readouterr().out
    assert "OpenVINO: not installed" in out and "ONNX Runtime MatMul" not in out
    monkeypatch.setitem(sys.modules, "onnx", None)  # without onnx: no graphs, said so
    assert peers.kernel_peers("matmul", a, a.T.copy(), "f32", 1) == []
    assert "onnx: not installed, so neither runs" in peers.header()


def _runtimes():
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("openvino")


@pytest.mark.parametrize("dtype", ["f32", "bf16", "int8", "s8"])
def test_matmul_peers_compute_the_product(dtype):
    _runtimes()
    rng = np.random.default_rng(0)
    if dtype == "int8":  # 7-bit A: ONNX Runtime's u8 x s8 pair sums saturate at 16 bits beyond it (on AVX2)
        a, b = rng.integers(0, 128, (37, 29)).astype(np.uint8), rng.integers(-128, 128, (29, 19)).astype(np.int8)
    elif dtype == "s8":  # (7-bit magnitudes likewise)
        a, b = rng.integers(-64, 64, (37, 29)).astype(np.int8), rng.integers(-128, 128, (29, 19)).astype(np.int8)
    else:
        a, b = rng.standard_normal((37, 29)).astype(np.float32), rng.standard_normal((29, 19)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    found = peers.kernel_peers("matmul", a, b, dtype, 1)
    names = [p.name for p in found]
    assert len(found) == {"f32": 2, "bf16": 1, "int8": 2, "s8": 2}[dtype], names
    for p in found:
        bound = 0.0 if dtype in ("int8", "s8") else (1e-5 if "ran f32" in p.name or dtype == "f32" else 2e-2) * np.abs(want).max()
        assert p.check(want) <= bound, p.name


def test_conv_peers_compute_the_convolution():
    _runtimes()
    rng = np.random.default_rng(1)
    x, w = rng.integers(0, 128, (2, 5, 9, 8)).astype(np.uint8), rng.integers(-128, 128, (4, 5, 3, 2)).astype(np.int8)
    conv = ((2, 1), (1, 0), (1, 2))
    want = conv2d_nchw(x.astype(np.float64), w.astype(np.float64), *conv)
    for dtype, (xs, ws) in (("int8", (x, w)), ("f32", (x.astype(np.float32), w.astype(np.float32)))):
        found = peers.kernel_peers("conv2d", xs, ws, dtype, 1, conv=conv)
        assert len(found) == 2
        for p in found:
            assert p.check(want) == 0.0, p.name  # (small integers: exact in f32 too)
    # NHWC / HWCF as Loom's --layout nhwc has them: the graph gets NCHW / FCRS
    xn, wn = peers.nchw(x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0), "nhwc")
    assert np.array_equal(xn, x) and np.array_equal(wn, w)


def test_the_bench_tables_name_each_peer_and_its_error(capsys):
    """Each peer is a column; a peer whose result is off (ONNX Runtime's MatMulInteger on
    full-range u8 x s8 without VNNI: its pair sums saturate at 16 bits) is listed under the
    table with its error, the JSON has every peer's error."""
    _runtimes()
    argv = ["--shapes", "--dtype", "int8", "--shapes-list", "40x16x24", "--peers", *FAST]
    assert loom_bench.main(argv + ["--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["rows"]
    assert set(row["peer_errors"]) == {"ONNX Runtime MatMulInteger", next(n for n in row["peers"] if "OpenVINO" in n)}
    assert loom_bench.main(argv) == 0
    out = capsys.readouterr().out
    assert "peers: ONNX Runtime" in out and "| ONNX Runtime MatMulInteger GOP/s |" in out
    off = [n for n, e in row["peer_errors"].items() if e > 0]
    assert all(f"- {n} on 40x16x24: max error" in out for n in off)
    assert ("off by more than the bound" in out) == bool(off)
    assert loom_bench.main(["--shapes", "--shapes-list", "9x7x5", "--peers", *FAST]) == 0
    out = capsys.readouterr().out
    assert "| ONNX Runtime MatMul GFLOP/s | OpenVINO MatMul GFLOP/s |" in out and "off by more" not in out


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_requantized_conv_peers_compute_the_layer(layout):
    """ONNX Runtime's QLinearConv, OpenVINO's QDQ graph and torch's quantized Conv2d compute
    the requantized layer the row times: within one step of Loom's reference (they
    requantize with one multiplier), in the graphs' NCHW."""
    _runtimes()
    layer = (2, 5, 9, 8, 4, 3, 2, (2, 1), (1, 0), (1, 2))
    problem = low_precision.RequantizedConvProblem("tiny", layer, np.random.default_rng(2), layout)
    found = low_precision.runtime_peers(problem, 1)
    assert [p.name.split(" (")[0] for p in found] == ["ONNX Runtime QLinearConv", "OpenVINO int8 Conv, requantized"]
    want = problem.peer_want()
    assert want.shape == (2, 4, 5, 6)
    for p in found:
        assert p.check(want) <= problem.peer_bound == 1.0, p.name
    if (torch := low_precision.torch_peers(problem, 1)):
        [run] = torch.values()
        assert np.abs(run().numpy().astype(np.int64) - want).max() <= 1


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_model_peers_run_the_exported_model(dtype):
    """torch.onnx.export of the model (a copy in f32: the model itself keeps its dtype)."""
    _runtimes()
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 5 * 5, 6)).eval()
    x = torch.randn(2, 3, 7, 7)
    if dtype == "bf16":
        model, x = model.to(torch.bfloat16), x.bfloat16()
    found = peers.model_peers(model, x, 1, dtype)
    assert [p.name.split(" ")[0] for p in found] == (["ONNX", "OpenVINO"] if dtype == "f32" else ["OpenVINO"])
    assert next(model.parameters()).dtype == (torch.float32 if dtype == "f32" else torch.bfloat16)
    with torch.no_grad():
        want = model.float()(x.float()).double().numpy()
    for p in found:
        assert p.check(want) <= 2e-2 * np.abs(want).max(), p.name

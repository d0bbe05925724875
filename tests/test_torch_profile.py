"""`compiler.explain(fast, x, profile=True)` and `profile_model`: where each call of a torch
model through the backend spends its time, layer by layer. Skipped without torch."""

from collections import OrderedDict

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import compiler as loom  # noqa: E402
from compiler.explain.torch import KINDS, profile_model  # noqa: E402
from compiler.frontends import torch_fx as torchfx  # noqa: E402
from passes.support.diagnostics import LoomError  # noqa: E402

nn = torch.nn


def _model():
    torch.manual_seed(0)
    return nn.Sequential(OrderedDict([
        ("conv1", nn.Conv2d(3, 8, 3, padding=1)), ("bn1", nn.BatchNorm2d(8)), ("relu1", nn.ReLU()),
        ("pool", nn.AvgPool2d(2, ceil_mode=True)),  # (in torch: Loom's windows end inside the input)
        ("conv2", nn.Conv2d(8, 16, 3, padding=1, bias=False)), ("relu2", nn.ReLU()),
        ("flat", nn.Flatten()), ("fc", nn.Linear(16 * 6 * 5, 10)),
    ])).eval()


def test_the_profile_names_each_layer_with_its_flops_and_each_op_torch_ran():
    model, x = _model(), torch.randn(2, 3, 11, 10)
    fast = torch.compile(model, backend=loom.torch_backend, dynamic=False)
    with torch.no_grad():
        want = fast(x)
    profile = profile_model(fast, x, calls=3)
    with torch.no_grad():
        assert torch.equal(fast(x), want)  # (and the model still runs unprofiled)
    loom_lines = {line.layer: line for line in profile.lines if line.kind == "loom"}
    assert {"conv1", "conv2", "fc"} <= set(loom_lines), loom_lines
    # 2 x multiply-adds: conv1 2*(2*11*10*8)*(3*3*3), conv2 (after the 2x2 pool: 6x5) 2*(2*6*5*16)*(8*3*3)
    assert loom_lines["conv1"].flops == 2 * (2 * 11 * 10 * 8) * 27
    assert loom_lines["conv2"].flops == 2 * (2 * 6 * 5 * 16) * 72
    assert loom_lines["fc"].flops == 2 * (2 * 10) * 480
    assert all(loom_lines[name].seconds > 0 and loom_lines[name].gflops() > 0 for name in ("conv1", "conv2", "fc"))
    torch_ops = [line.op for line in profile.lines if line.kind == "torch"]
    assert any("avg_pool2d" in op for op in torch_ops), torch_ops
    kernels = {line.where for line in profile.lines if line.kind == "kernel"}
    assert len(kernels) == 2 and profile.crossings == 2 * len(kernels)  # (the pool splits them)
    # each kind's time adds up to the call's (the rest is "outside the graphs")
    assert {line.kind for line in profile.lines} <= set(KINDS)
    assert sum(line.seconds for line in profile.lines) == pytest.approx(profile.seconds, rel=1e-6)
    text = str(profile)
    assert "profile: each of 3 calls of the model" in text and "conv2" in text and "avg_pool2d" in text


def test_explain_with_profile_gives_the_partitions_then_the_profile():
    model, x = _model(), torch.randn(1, 3, 11, 10)
    fast = torch.compile(model, backend=loom.torch_backend, dynamic=False)
    text = loom.explain(fast, x, profile=True, calls=2)
    report, _, profile = text.partition("\n\nprofile: ")
    assert "ATen ops:" in report and "avg_pool2d" in report
    assert profile.startswith("each of 2 calls of the model") and "conv1" in profile


def test_the_traced_ops_carry_the_layer_they_came_from():
    model, x = _model(), torch.randn(1, 3, 11, 10)
    fast = torch.compile(model, backend=loom.torch_backend, dynamic=False)
    with torchfx.recording() as ran, torch.no_grad():
        fast(x)
    part = next(p for p in ran[0].partitions if any(n.target is torchfx.CONV for n in p.graph_nodes))
    source = part.jit.lower(*part.last_arrays)
    assert 'loc("conv1":1:1)' in source and 'loc("relu1":1:1)' in source, source


def test_profile_needs_a_graph_through_the_backend():
    with pytest.raises(LoomError, match="no graph ran through Loom's backend"):
        profile_model(lambda t: t + 1, torch.ones(3))
    with pytest.raises(ValueError, match="calls must be a positive integer"):
        profile_model(lambda t: t + 1, torch.ones(3), calls=0)


def test_a_profiled_jit_function_times_its_lines():
    @loom.jit(profile=True)
    def f(a, b):
        return loom.relu(a @ b)  # the matmul's line

    a, b = np.ones((16, 8), np.float32), np.ones((8, 4), np.float32)
    np.testing.assert_array_equal(f(a, b), np.full((16, 4), 8, np.float32))
    rows = f.kernel(a, b).profile()
    assert rows and all(r.calls == 1 for r in rows)
    assert any(r.location.endswith(f"test_torch_profile.py:{f.fn.__code__.co_firstlineno + 2}:26") for r in rows), rows

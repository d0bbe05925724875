"""bfloat16 models through the torch backend: `model.to(torch.bfloat16)` with bfloat16 inputs,
and float32 models inside `torch.autocast("cpu", dtype=torch.bfloat16)`. Loom's matmuls and
convolutions read bfloat16 and sum in float32, the ops after them compute in float32, and a
partition's results are rounded to bfloat16 once, where torch stores them. Checked against
the model in float64 (of the same bfloat16 parameters and inputs) with a bound of bfloat16's
roundings, against torch's own bfloat16 run, and bit for bit on small integers."""

import copy

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import compiler as loom  # noqa: E402
from compiler.frontends import torch_fx as torchfx  # noqa: E402
from passes.support.target import host  # noqa: E402
from test_torch_backend import PANEL_CONVS, _randomize_bn, conv_bn_relu, in_panels  # noqa: E402

nn = torch.nn
BF16_EPS = 2.0 ** -8  # bfloat16's unit roundoff is half of it


def _randomized(model, seed=0):
    return _randomize_bn(model, seed).eval()


class Block(nn.Module):
    """A residual block (conv-bn-relu, conv-bn, a 1x1/2 projection), flattened into a Linear."""

    def __init__(self, c=3, f=8, classes=5, hw=4):
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(c, f, 3, 2, 1, bias=False), nn.BatchNorm2d(f), nn.ReLU())
        self.b = nn.Sequential(nn.Conv2d(f, f, 3, 1, 1, bias=False), nn.BatchNorm2d(f))
        self.down = nn.Sequential(nn.Conv2d(c, f, 1, 2, bias=False), nn.BatchNorm2d(f))
        self.fc = nn.Linear(f * hw * hw, classes)

    def forward(self, x):
        y = torch.relu(self.b(self.a(x)) + self.down(x))
        return self.fc(torch.flatten(y, 1))


def _reference(model, x):
    """The model in float64 on the same (bfloat16-valued) parameters and input."""
    model64 = copy.deepcopy(model).double()
    with torch.no_grad():
        return model64(x.double())


def _rel(out, ref) -> float:
    return ((out.double() - ref.double()).abs().max() / ref.double().abs().max()).item()


def test_a_bfloat16_model_runs_on_bfloat16_operands():
    torch.manual_seed(0)
    model = _randomized(Block()).to(torch.bfloat16)
    x = torch.randn(2, 3, 8, 8).bfloat16()
    program = loom.from_torch(model, (x,))
    assert program.partitions and all(q.where == "loom" for q in program.ops), program.report()
    with torch.no_grad():
        out, eager = program(x), model(x)
    assert out.dtype == torch.bfloat16 and out.shape == eager.shape
    # the roundings: the filters with their batch norm folded in, the activation the second conv
    # reads and the result (one bfloat16 rounding each) against float64 of the same model
    assert _rel(out, _reference(model, x)) <= 4 * BF16_EPS
    assert _rel(out, eager) <= 2e-2
    arrays = program.partitions[0].last_arrays
    # bfloat16: the input, the three filters, the Linear's weight and bias (widened in the kernel);
    # the biases folded from the batch norms in float32
    # the input passed as it is (its place among the arguments follows the graph's placeholders)
    [given] = [a for a in arrays if np.shares_memory(a, torchfx._to_numpy(x))]
    assert given.dtype == ml_dtypes.bfloat16
    assert sum(a.dtype == ml_dtypes.bfloat16 for a in arrays) == 6
    assert {a.dtype for a in arrays} == {np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32)}


def test_an_autocast_region():
    """autocast casts the parameters (the casts are folded with them: the filters are made in
    bfloat16 once, not cast at each call) and the input; batch norm and relu follow in
    bfloat16, the result is bfloat16 as torch's."""
    torch.manual_seed(1)
    model = _randomized(Block(), seed=1)

    def f(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return model(x)

    x = torch.randn(2, 3, 8, 8)
    torch._dynamo.reset()
    fast = torch.compile(f, backend=loom.torch_backend, dynamic=False)
    with torchfx.recording() as ran, torch.no_grad():
        out = fast(x)
        eager = f(x)
    [program] = ran
    assert program.partitions and all(q.where == "loom" for q in program.ops), program.report()
    assert out.dtype == eager.dtype == torch.bfloat16
    assert _rel(out, eager) <= 2e-2
    assert _rel(out, _reference(model, x.bfloat16().float())) <= 6 * BF16_EPS
    arrays = program.partitions[0].last_arrays
    [given] = [a for a in arrays if np.shares_memory(a, x.numpy())]
    assert given.dtype == np.float32  # cast in the kernel
    assert sum(a.dtype == ml_dtypes.bfloat16 for a in arrays) == 4  # three filters, the Linear's weight


def test_small_integers_are_exact_in_bfloat16():
    """Integer weights and inputs whose every sum stays within bfloat16's 8 significant bits:
    Loom's bfloat16 result equals float64's bit for bit."""
    model = nn.Sequential(nn.Conv2d(3, 5, (3, 2), padding=1), nn.ReLU(), nn.Conv2d(5, 4, 1)).eval()
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randint(-1, 2, p.shape, generator=g).float())
    model = model.to(torch.bfloat16)
    x = torch.randint(-2, 3, (2, 3, 6, 6), generator=g).bfloat16()
    program = loom.from_torch(model, (x,))
    with torch.no_grad():
        out = program(x)
    assert torch.equal(out.double(), _reference(model, x))


@settings(deadline=None, max_examples=25)
@given(n=st.sampled_from([1, 2]), c=st.sampled_from([1, 3, 5]), f=st.sampled_from([1, 4, 7, 16]),
       hw=st.tuples(st.integers(3, 11), st.integers(3, 11)),
       kernel=st.tuples(st.sampled_from([1, 2, 3]), st.sampled_from([1, 3])),
       stride=st.sampled_from([1, 2]), padding=st.sampled_from([0, 1]), bias=st.booleans(), bn=st.booleans(),
       autocast=st.booleans())
def test_random_bfloat16_conv_layers(n, c, f, hw, kernel, stride, padding, bias, bn, autocast):
    if any(d + 2 * padding - r < 0 for d, r in zip(hw, kernel)):
        return
    torch.manual_seed(6)
    layers = [nn.Conv2d(c, f, kernel, stride, padding, bias=bias)] + ([nn.BatchNorm2d(f)] if bn else [])
    model = _randomized(nn.Sequential(*layers, nn.ReLU()))
    x = torch.randn(n, c, *hw)
    if autocast:
        def fn(x):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return model(x)
        torch._dynamo.reset()
        with torchfx.recording() as ran, torch.no_grad():
            out = torch.compile(fn, backend=loom.torch_backend, dynamic=False)(x)
        [program] = ran
    else:
        model, x = model.to(torch.bfloat16), x.bfloat16()
        program = loom.from_torch(model, (x,))
        with torch.no_grad():
            out = program(x)
    assert program.partitions and program.partitions[0].error is None, program.report()
    ref = _reference(model, x.bfloat16().float() if autocast else x)
    assert out.dtype == torch.bfloat16
    # the folded filter and the result rounded to bfloat16, the f32 sum (K terms) besides
    k = c * kernel[0] * kernel[1]
    assert (out.double() - ref).abs().max() <= (2 * BF16_EPS + 4 * k * 2.0 ** -24) * max(ref.abs().max(), 1e-30)


def test_conversions_loom_does_not_make_stay_in_torch():
    def fn(x, w):
        return (x.half() @ w.half(), x.double() @ w.double().bfloat16().double(), x.bfloat16() @ w.bfloat16())

    x, w = torch.randn(4, 3), torch.randn(3, 2)
    program = torchfx.compile_graph(fn, [x, w])
    reasons = {q.reason for q in program.ops if q.where == "torch"}
    assert "a conversion from float32 to float16 (Loom converts between float32 and bfloat16)" in reasons
    assert "a conversion from float64 to bfloat16 (Loom converts between float32 and bfloat16)" in reasons
    [part] = program.partitions  # the bfloat16 product: two casts and the matmul
    with torch.no_grad():
        half, double, bf16 = program(x, w)
    ref = x.bfloat16().double() @ w.bfloat16().double()
    assert bf16.dtype == torch.bfloat16 and (bf16.double() - ref).abs().max() <= BF16_EPS * ref.abs().max()


def test_loom_bench_times_a_bfloat16_model(capsys):
    """`loom-bench --model mlp --dtype bf16`: the model in bfloat16 in Loom and in torch eager,
    checked against torch's bfloat16 run (the exit status), one short round."""
    from tools import loom_bench

    argv = ["--model", "mlp", "--dtype", "bf16", "--batches", "1", "--threads-list", "1", "--repeat", "1",
            "--budget", "0.01"]
    assert loom_bench.main(argv) == 0
    out = capsys.readouterr().out
    assert "inference, bf16" in out and "| mlp | bf16 | 1 | 1 |" in out and "| ok |" in out
    assert loom_bench.main([*argv, "--freeze"]) == 0  # (the parameters folded once, never checked)
    out = capsys.readouterr().out
    assert "torch_backend, freeze=True), inference, bf16" in out and "| ok |" in out


def test_bfloat16_parameters_changed_in_place_are_folded_again():
    """The folded bfloat16 filters and the autocast-cast ones follow writes to the parameters
    (compared bit for bit at each call), call by call against torch's own bfloat16 run."""
    torch.manual_seed(3)
    model = _randomized(Block(), seed=3).to(torch.bfloat16)
    x = torch.randn(2, 3, 8, 8).bfloat16()
    program = loom.from_torch(model, (x,))
    for step in range(3):
        with torch.no_grad():
            out, eager = program(x), model(x)
            assert _rel(out, eager) <= 2e-2, step
            assert _rel(out, _reference(model, x)) <= 4 * BF16_EPS, step
            model.a[0].weight.mul_(-1.5)  # the first filter; then a batch norm folded into the second
            model.b[1].running_var.mul_(4.0)
            model.fc.weight.data.add_(0.25)  # (through .data: no version bump)


@pytest.mark.parametrize("spec", ["l2=65536", "l2=65536,bf16_dot=0"])
def test_bfloat16_filters_larger_than_half_of_l2_are_folded_into_panels_of_pairs(monkeypatch, spec):
    """On a host with AVX512-BF16 a folded bfloat16 filter larger than half of L2 (a 64 KiB
    L2 here, through LOOM_TARGET) is packed in panels of pairs of channels when folded
    (`cost_model.filter_panel` with vdpbf16ps), the layout its direct convolution reads in
    place; without the instruction it stays HWCF. Within bfloat16's bound either way, and
    folded again when a weight changes."""
    monkeypatch.setenv("LOOM_TARGET", spec)
    torch.manual_seed(4)
    model = _randomized(nn.Sequential(nn.Conv2d(32, 64, 3, 1, 1), nn.BatchNorm2d(64), nn.ReLU(),
                                      nn.Conv2d(64, 64, 3, 2, 1), nn.ReLU()), seed=4).to(torch.bfloat16)
    x = torch.randn(1, 32, 14, 14).bfloat16()
    program = loom.from_torch(model, (x,))
    [part] = program.partitions
    grouped = host().bf16_dot  # (of the target LOOM_TARGET gives)
    assert part.error is None and (len(part.filter_panels) == 2 if grouped else not part.filter_panels)
    filters = [line for line in part.jit.specialize(*part._example).source.splitlines() if "loom.conv2d" in line]
    assert all(("x2xbf16>) -> " in line) == bool(grouped) for line in filters), filters
    for step in range(2):
        with torch.no_grad():
            out, eager = program(x), model(x)
        assert _rel(out, eager) <= 2e-2 and _rel(out, _reference(model, x)) <= 4 * BF16_EPS, step
        with torch.no_grad():
            model[3].weight.mul_(-1.5)


@pytest.mark.skipif(not host().bf16_dot, reason="the host has no AVX512-BF16: bfloat16 filters stay HWCF")
@settings(deadline=None, max_examples=20)
@given(c=st.sampled_from([2, 4, 6]), hw=st.tuples(st.integers(1, 9), st.integers(1, 9)), **PANEL_CONVS)
def test_random_bfloat16_convs_with_filters_in_panels_of_pairs(n, c, f, hw, window, stride, padding, nr, bias, bn):
    """The panel width forced (NR = 4 or 1, or F itself: one panel): every bfloat16 conv's
    folded filter, batch norm included, packed in panels of pairs; within bfloat16's bound
    of the float64 model, as the HWCF filter's kernel is."""
    if any(d + 2 * padding < window for d in hw):
        return
    model = conv_bn_relu(c, f, window, stride, padding, bias, bn, 12).to(torch.bfloat16)
    x = torch.randn(n, c, *hw).bfloat16()
    width = nr if nr > 1 else f
    program, filters = in_panels(model, x, width)
    assert all(f"x{c // 2}x{width}x2xbf16>) -> " in line for line in filters), filters
    with torch.no_grad():
        out = program(x)
    ref = _reference(model, x)
    k = c * window * window
    assert (out.double() - ref).abs().max() <= (2 * BF16_EPS + 4 * k * 2.0 ** -24) * max(ref.abs().max(), 1e-30)

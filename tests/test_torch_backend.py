"""The torch backend (compiler.frontends.torch_fx): small models built here, run through
`torch.compile(backend=compiler.torch_backend)` and `compiler.from_torch`, against the same
model in float64. Skipped when torch is not installed (it is the `torch` extra)."""

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import compiler as loom  # noqa: E402
from compiler.frontends import torch_fx as torchfx  # noqa: E402

nn = torch.nn
EPS32 = float(np.finfo(np.float32).eps)


def check(out, model, *inputs, k: int):
    """out against the model run in float64 on the same inputs: |out - ref| <= 4 K eps max|ref|,
    K the reduction length along the longest path (summed over the layers)."""
    model64 = _double(model)
    with torch.no_grad():
        ref = model64(*(x.double() for x in inputs))
    outs, refs = (out, ref) if isinstance(out, tuple) else ((out,), (ref,))
    for o, r in zip(outs, refs):
        assert o.dtype == torch.float32 and o.shape == r.shape
        bound = 4 * k * EPS32 * max(r.abs().max().item(), 1e-30)
        err = (o.double() - r).abs().max().item()
        assert err <= bound, f"max error {err:.3g} above {bound:.3g}"


def _double(model):
    import copy

    return copy.deepcopy(model).double()


def _randomize_bn(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d | nn.BatchNorm1d):
            n = m.num_features
            m.running_mean.copy_(torch.rand(n, generator=g) * 2 - 1)
            m.running_var.copy_(torch.rand(n, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(n, generator=g) + 0.5)
            m.bias.data.copy_(torch.rand(n, generator=g) - 0.5)
    return model


class ConvBnRelu(nn.Sequential):
    def __init__(self, c, f, stride=1):
        super().__init__(nn.Conv2d(c, f, 3, stride, 1, bias=False), nn.BatchNorm2d(f), nn.ReLU(inplace=True))


class Residual(nn.Module):
    """torchvision's BasicBlock: two 3x3 conv-bn, a 1x1/2 downsample on the shortcut."""

    def __init__(self, c, f, stride):
        super().__init__()
        self.a = ConvBnRelu(c, f, stride)
        self.conv = nn.Conv2d(f, f, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(f)
        self.down = nn.Sequential(nn.Conv2d(c, f, 1, stride, bias=False), nn.BatchNorm2d(f))

    def forward(self, x):
        return torch.relu(self.bn(self.conv(self.a(x))) + self.down(x))


def mlp(d=24, h=40):
    return nn.Sequential(nn.Linear(d, h), nn.ReLU(), nn.Linear(h, d))


def compiled(model):
    torch._dynamo.reset()
    return torch.compile(model, backend=loom.torch_backend, dynamic=False)


def programs(fn, *args):
    with torchfx.recording() as ran, torch.no_grad():
        out = fn(*args)
    return out, ran


def test_conv_bn_relu_stack():
    torch.manual_seed(0)
    model = _randomize_bn(nn.Sequential(ConvBnRelu(3, 8), ConvBnRelu(8, 16, 2), ConvBnRelu(16, 16))).eval()
    x = torch.randn(2, 3, 17, 19)
    out, ran = programs(compiled(model), x)
    check(out, model, x, k=27 + 72 + 144)
    report = ran[0].report()
    assert "9 ATen ops: 9 in Loom (1 kernels), 0 in torch" in report, report
    assert "aten.convolution x3" in report and "NHWC inside" in report


def test_residual_block_folds_batch_norm_and_fuses_the_shortcut():
    torch.manual_seed(1)
    model = _randomize_bn(Residual(8, 16, 2)).eval()
    x = torch.randn(1, 8, 15, 15)
    program = loom.from_torch(model, (x,))
    check(program(x), model, x, k=72 + 144 + 8)
    [part] = program.partitions
    assert part.error is None
    # the batch norms are folded: the kernel takes the input and three filters with their biases
    assert len(part.last_arrays) == 1 + 3 * 2
    source = part.jit.specialize(*part.last_arrays).source
    assert source.count("loom.conv2d") == 3 and "batch_norm" not in source


def test_batch_norms_not_after_a_conv_are_a_scale_and_shift():
    """A batch norm a conv2d does not feed alone: x * scale + shift per channel, in NHWC after
    a relu in a conv group, in NCHW before a flatten, and on the rows of a linear layer."""
    torch.manual_seed(8)
    conv_group = _randomize_bn(nn.Sequential(nn.Conv2d(3, 6, 3), nn.ReLU(), nn.BatchNorm2d(6), nn.Conv2d(6, 4, 1))).eval()
    x = torch.randn(2, 3, 7, 7)
    program = loom.from_torch(conv_group, (x,))
    check(program(x), conv_group, x, k=27 + 6 + 1)
    assert all(q.where == "loom" for q in program.ops), program.report()
    head = _randomize_bn(nn.Sequential(nn.BatchNorm2d(3), nn.Flatten(), nn.Linear(3 * 4 * 4, 8), nn.BatchNorm1d(8),
                                       nn.ReLU())).eval()
    x = torch.randn(5, 3, 4, 4)
    program = loom.from_torch(head, (x,))
    check(program(x), head, x, k=48 + 2)
    assert all(q.where == "loom" for q in program.ops), program.report()


def test_mlp_through_torch_compile():
    torch.manual_seed(2)
    model = mlp().eval()
    x = torch.randn(5, 24)
    out, ran = programs(compiled(model), x)
    check(out, model, x, k=24 + 40)
    [program] = ran
    assert [p.where for p in program.placements] == ["loom"] * len(program.placements)
    assert "aten.addmm x2" in program.report()


def test_an_unsupported_op_in_the_middle_splits_the_graph():
    torch.manual_seed(3)
    model = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 8, 3),
                          nn.Flatten(), nn.Linear(8 * 2 * 2, 10), nn.Softmax(dim=1)).eval()
    x = torch.randn(3, 4, 8, 8)
    program = loom.from_torch(model, (x,))
    check(program(x), model, x, k=36 + 72 + 32)
    assert len(program.partitions) == 2
    where = {p.op: p for p in program.placements}
    assert where["aten.max_pool2d_with_indices"].where == "torch"
    assert "no operation for aten.max_pool2d_with_indices" in where["aten.max_pool2d_with_indices"].reason
    assert where["aten._softmax"].where == "torch"
    assert where["aten.addmm"].where == "loom"
    report = program.report()
    assert "in torch:" in report and "aten._softmax: Loom has no operation" in report


def test_a_view_torch_takes_of_an_nhwc_result():
    """conv2d's result comes back channels_last; torch's own view of it (after an op Loom
    leaves to torch) would fail on those strides: it becomes a reshape."""
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.GELU(), nn.Flatten(), nn.Softmax(dim=1)).eval()
    x = torch.randn(2, 3, 6, 6)
    program = loom.from_torch(model, (x,))
    check(program(x), model, x, k=27)
    assert [p.where for p in program.placements][:1] == ["loom"]


class ChannelShuffle(nn.Module):
    """ShuffleNet's shuffle between two convs: a 5-D view, a transpose, a 4-D view."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 8, 1), nn.Conv2d(8, 4, 3)

    def forward(self, x):
        y = torch.relu(self.a(x))
        n, c, h, w = y.shape
        y = y.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)
        return self.b(y)


def test_a_conv_after_a_reshape():
    """The conv's input is a reshape left pending in the trace: applied before it."""
    torch.manual_seed(10)
    model = ChannelShuffle().eval()
    x = torch.randn(2, 3, 6, 6)
    program = loom.from_torch(model, (x,))
    check(program(x), model, x, k=3 + 72)
    assert all(p.error is None for p in program.partitions), program.report()


def test_refusals_are_left_to_torch_with_the_reason():
    torch.manual_seed(4)
    grouped = nn.Sequential(nn.Conv2d(4, 8, 3, groups=2), nn.ReLU(), nn.Conv2d(8, 8, 1)).eval()
    x = torch.randn(1, 4, 6, 6)
    program = loom.from_torch(grouped, (x,))
    check(program(x), grouped, x, k=18 + 8)
    first = program.placements[0]
    assert first.where == "torch" and "grouped convolution" in first.reason
    # a half-precision layer stays in torch (its result is torch's own, bit for bit)
    half = nn.Linear(8, 4).half().eval()
    xh = torch.randn(2, 8).half()
    program = loom.from_torch(half, (xh,))
    assert not program.partitions
    assert any("dtype float16" in (p.reason or "") for p in program.placements)
    with torch.no_grad():
        assert torch.equal(program(xh), half(xh))


def test_training_mode_and_autograd_are_refused_or_left_to_torch():
    model = ConvBnRelu(3, 4).train()
    with pytest.raises(ValueError, match=r"model.eval\(\)"):
        loom.from_torch(model, (torch.randn(1, 3, 5, 5),))
    # grad enabled, parameters requiring grad: the whole graph runs in torch, gradients work
    net = mlp().eval()
    x = torch.randn(3, 24)
    fast = compiled(net)
    with torchfx.recording() as ran:
        y = fast(x)
    assert y.grad_fn is not None
    y.sum().backward()
    assert net[0].weight.grad is not None
    assert "autograd" in ran[0].report() and not ran[0].partitions
    # a batch norm in training mode inside a graph: left to torch
    captured = torchfx.compile_graph(lambda x: torch.relu(nn.functional.batch_norm(
        torch.nn.functional.linear(x, torch.ones(4, 4)), None, None, training=True)), [torch.randn(3, 4)])
    assert any("training mode" in (p.reason or "") for p in captured.placements)


def test_dynamic_shapes_and_devices_stay_in_torch():
    torch._dynamo.reset()
    net = mlp().eval()
    fast = torch.compile(net, backend=loom.torch_backend, dynamic=True)
    x = torch.randn(7, 24)
    out, ran = programs(fast, x)
    with torch.no_grad():
        assert torch.equal(out, net(x))
    assert "dynamic shapes" in ran[0].report()
    assert "off the CPU" in torchfx._whole_graph_reason([torch.empty(2, device="meta")])


def test_folded_parameters_follow_in_place_changes():
    torch.manual_seed(5)
    model = _randomize_bn(nn.Sequential(ConvBnRelu(3, 6))).eval()
    x = torch.randn(1, 3, 9, 9)
    program = loom.from_torch(model, (x,))
    check(program(x), model, x, k=27)
    with torch.no_grad():
        model[0][1].running_var.mul_(4.0)  # the folded filter is stale: folded again at the next call
        model[0][0].weight.add_(0.5)
    check(program(x), model, x, k=27)


def test_a_transposed_input_is_copied_again_for_new_values():
    """y.t() read by a matmul is stored transposed like a weight; for an input that is a new
    tensor each call (or the same one changed in place) it is copied again, never stale."""
    fast = compiled(lambda x, y: torch.relu(x @ y.t()))
    g = torch.Generator().manual_seed(9)
    x = torch.randint(-3, 4, (5, 6), generator=g).float()
    with torch.no_grad():
        for _ in range(2):
            y = torch.randint(-3, 4, (7, 6), generator=g).float()
            assert torch.equal(fast(x, y), torch.relu(x @ y.t()))
        y.mul_(-1)  # the same tensor, another version
        assert torch.equal(fast(x, y), torch.relu(x @ y.t()))


def test_inputs_are_passed_without_copies():
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU()).eval()
    x = torch.randn(2, 3, 10, 10)
    program = loom.from_torch(model, (x,))
    program(x)
    [part] = program.partitions
    assert np.shares_memory(part.last_arrays[0], x.numpy())  # NCHW viewed as NHWC
    cl = x.contiguous(memory_format=torch.channels_last)  # a channels_last tensor: NHWC, contiguous
    out = program(cl)
    assert np.shares_memory(part.last_arrays[0], cl.numpy()) and part.last_arrays[0].flags.c_contiguous
    check(out, model, x, k=27)
    assert out.is_contiguous(memory_format=torch.channels_last)  # the result comes back as NHWC


@settings(deadline=None)
@given(n=st.sampled_from([1, 2, 3]), c=st.sampled_from([1, 3, 5]), f=st.sampled_from([1, 4, 7, 16]),
       hw=st.tuples(st.integers(3, 13), st.integers(3, 13)), kernel=st.sampled_from([1, 2, 3]),
       stride=st.sampled_from([1, 2]), padding=st.sampled_from([0, 1]), dilation=st.sampled_from([1, 2]),
       bias=st.booleans(), bn=st.booleans())
def test_random_conv_layers(n, c, f, hw, kernel, stride, padding, dilation, bias, bn):
    if (hw[0] + 2 * padding - dilation * (kernel - 1) - 1) < 0 or (hw[1] + 2 * padding - dilation * (kernel - 1) - 1) < 0:
        return
    torch.manual_seed(6)
    layers = [nn.Conv2d(c, f, kernel, stride, padding, dilation, bias=bias)] + ([nn.BatchNorm2d(f)] if bn else [])
    model = _randomize_bn(nn.Sequential(*layers, nn.ReLU())).eval()
    x = torch.randn(n, c, *hw)
    program = loom.from_torch(model, (x,))
    assert program.partitions and program.partitions[0].error is None
    check(program(x), model, x, k=c * kernel * kernel + 1)


def test_small_integers_are_exact():
    """Integer-valued inputs and weights: every sum is exact in f32, so Loom equals torch bit for bit."""
    model = nn.Sequential(nn.Conv2d(3, 5, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(5 * 6 * 6, 4)).eval()
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randint(-2, 3, p.shape, generator=g).float())
    x = torch.randint(-3, 4, (2, 3, 6, 6), generator=g).float()
    program = loom.from_torch(model, (x,))
    with torch.no_grad():
        assert torch.equal(program(x), model(x))


def test_explain_reports_the_partition_and_the_kernels():
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Softmax(dim=1)).eval()
    x = torch.randn(4, 16)
    text = loom.explain(compiled(model), x, measure_time=False)
    assert "ATen ops: 3 in Loom (1 kernels), 1 in torch" in text
    assert "aten._softmax: Loom has no operation" in text
    assert "== loom kernel" in text and "loop nest" in text


def test_nothing_else_imports_torch():
    code = ("import sys, numpy as np, compiler\n"
            "k = compiler.compile(open('examples/matmul_bias_relu.mlir').read(), cache=False)\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=__file__.rsplit("/tests/", 1)[0])

"""The torch backend (compiler.frontends.torch_fx): small models built here, run through
`torch.compile(backend=compiler.torch_backend)` and `compiler.from_torch`, against the same
model in float64. Skipped when torch is not installed (it is the `torch` extra)."""

import functools
import inspect
import re
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import compiler as loom  # noqa: E402
from compiler.frontends import torch_fx as torchfx  # noqa: E402
from compiler.numpy_reference import winograd_growth  # noqa: E402
from passes.analysis import cost_model  # noqa: E402

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
            if m.affine:
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


def compiled(model, **options):
    torch._dynamo.reset()
    backend = functools.partial(loom.torch_backend, **options) if options else loom.torch_backend
    return torch.compile(model, backend=backend, dynamic=False)


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


class SequenceNorm(nn.Module):
    """A linear layer over a sequence, then a batch norm of its channels: (N, L, C) -> (N, C, L)."""

    def __init__(self, d, c):
        super().__init__()
        self.fc, self.bn = nn.Linear(d, c), nn.BatchNorm1d(c)

    def forward(self, x):
        return self.bn(self.fc(x).transpose(1, 2))


def test_batch_norms_not_after_a_conv_are_a_scale_and_shift():
    """A batch norm a conv2d does not feed alone: x * scale + shift per channel, in NHWC after
    a relu in a conv group, in NCHW before a flatten, on the rows of a linear layer, and along
    dimension 1 of a 3-D tensor (its last dimension as long as its channels: a scale along the
    wrong one broadcasts and is wrong)."""
    torch.manual_seed(8)
    conv_group = _randomize_bn(nn.Sequential(nn.Conv2d(3, 6, 3), nn.ReLU(), nn.BatchNorm2d(6),
                                             nn.Conv2d(6, 4, 1))).eval()
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
    sequence = _randomize_bn(SequenceNorm(6, 5)).eval()
    x = torch.randn(3, 5, 6)
    program = loom.from_torch(sequence, (x,))
    check(program(x), sequence, x, k=6 + 2)
    assert all(q.where == "loom" for q in program.ops), program.report()



def test_batch_norms_without_weight_and_bias():
    """BatchNorm(affine=False): its weight and bias are None in the graph; folded into the conv
    before it, a scale and shift after a linear layer."""
    torch.manual_seed(19)
    model = _randomize_bn(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, affine=False), nn.ReLU(), nn.Flatten(),
                                        nn.Linear(4 * 3 * 3, 5), nn.BatchNorm1d(5, affine=False))).eval()
    x = torch.randn(2, 3, 5, 5)
    program = loom.from_torch(model, (x,))
    check(program(x), model, x, k=27 + 36 + 2)
    assert all(q.where == "loom" for q in program.ops), program.report()


class LegitBatchNorms(nn.Module):
    """Batch norms as the ATen op torch.export's graphs hold, aten._native_batch_norm_legit_no_training
    (its eps after the momentum): folded into a conv, and a scale and shift after a linear layer."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn2 = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, eps=0.5)
        self.fc, self.bn1 = nn.Linear(4 * 3 * 3, 5), nn.BatchNorm1d(5, eps=0.25)

    def forward(self, x):
        def bn(m, y):
            return torch.ops.aten._native_batch_norm_legit_no_training(y, m.weight, m.bias, m.running_mean,
                                                                       m.running_var, 0.1, m.eps)[0]

        return bn(self.bn1, self.fc(torch.relu(bn(self.bn2, self.conv(x))).flatten(1)))


def test_batch_norms_as_the_legit_aten_op():
    torch.manual_seed(20)
    model = _randomize_bn(LegitBatchNorms()).eval()
    x = torch.randn(2, 3, 5, 5)
    program = loom.from_torch(model, (x,))
    check(program(x), model, x, k=27 + 36 + 2)
    assert all(q.where == "loom" for q in program.ops), program.report()
    assert sum(q.op == "aten._native_batch_norm_legit_no_training" for q in program.ops) == 2, program.report()

def test_mlp_through_torch_compile():
    torch.manual_seed(2)
    model = mlp().eval()
    x = torch.randn(5, 24)
    fast = compiled(model)
    with torchfx.recording() as outer, torch.no_grad():
        with torchfx.recording() as ran:
            out = fast(x)
            check(fast(x), model, x, k=24 + 40)  # (a program is recorded once, when it first runs)
        assert outer == []
        fast(x)
    check(out, model, x, k=24 + 40)
    [program] = ran
    assert outer == [program]
    assert [p.where for p in program.placements] == ["loom"] * len(program.placements)
    assert "aten.addmm x2" in program.report()


class ConvBnSkip(nn.Module):
    """A conv2d whose result a batch norm and an add both read: the batch norm is not folded into it."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)

    def forward(self, x):
        y = self.conv(x)
        return torch.relu(self.bn(y) + y)


def test_a_batch_norm_is_folded_only_into_a_conv_it_alone_reads():
    torch.manual_seed(16)
    model = _randomize_bn(ConvBnSkip()).eval()
    x = torch.randn(2, 3, 7, 6)
    program = loom.from_torch(model, (x,))
    check(program(x), model, x, k=27 + 2)
    assert all(q.where == "loom" for q in program.ops), program.report()


def test_alpha_and_beta_scale_their_own_operands():
    """add/sub's alpha scales the second operand, addmm's beta the bias and alpha the product:
    small integers, exact against numpy."""
    g = np.random.default_rng(17)
    x, w, b = (torch.from_numpy(g.integers(-3, 4, shape).astype(np.float32)) for shape in [(4, 5), (5, 3), (4, 3)])
    fast = compiled(lambda x, w, b: (torch.add(x @ w, b, alpha=2.0), torch.sub(b, x @ w, alpha=3.0),
                                     torch.addmm(b, x, w, beta=0.5, alpha=-2.0)))
    out, ran = programs(fast, x, w, b)
    assert ran[0].partitions and all(p.where == "loom" for p in ran[0].ops), ran[0].report()
    xw = x.double().numpy() @ w.double().numpy()
    bn = b.double().numpy()
    for o, ref in zip(out, [xw + 2 * bn, bn - 3 * xw, 0.5 * bn - 2 * xw]):
        assert np.array_equal(o.numpy(), ref)


def test_an_unsupported_op_in_the_middle_splits_the_graph():
    torch.manual_seed(3)
    model = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2, ceil_mode=True),
                          nn.Conv2d(8, 8, 3), nn.Flatten(), nn.Linear(8 * 2 * 2, 10), nn.Softmax(dim=1)).eval()
    x = torch.randn(3, 4, 7, 7)
    program = loom.from_torch(model, (x,))
    check(program(x), model, x, k=36 + 4 + 72 + 32)
    assert len(program.partitions) == 2
    where = {p.op: p for p in program.placements}
    assert where["aten.avg_pool2d"].where == "torch"
    assert "ceil_mode=True" in where["aten.avg_pool2d"].reason
    assert where["aten._softmax"].where == "torch"
    assert where["aten.addmm"].where == "loom"
    report = program.report()
    assert "in torch:" in report and "aten._softmax: Loom has no operation" in report


@pytest.mark.parametrize("batch", [1, 3])
def test_a_resnet_stem_and_head_with_their_pools_are_one_kernel(batch):
    """conv, batch norm, relu, max pool (3x3/2, padded), conv, the global average pool
    (adaptive_avg_pool2d: a mean over H and W), flatten, linear: every op in one Loom kernel,
    the pools on NHWC arrays; within the f32 bound of float64."""
    torch.manual_seed(5)
    model = _randomize_bn(nn.Sequential(
        nn.Conv2d(3, 16, 7, 2, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
        nn.Conv2d(16, 24, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(24, 5))).eval()
    x = torch.randn(batch, 3, 29, 31)
    fast = torch.compile(model, backend=loom.torch_backend, dynamic=False)
    with torchfx.recording() as ran, torch.no_grad():
        out = fast(x)
    check(out, model, x, k=147 + 144 + 8 * 8 + 24)
    (program,) = ran
    assert all(p.where == "loom" for p in program.ops), program.report()
    assert len(program.partitions) == 1
    ops = {p.op for p in program.ops}
    assert {"aten.max_pool2d_with_indices", "aten.mean"} <= {o.split(".dim")[0] for o in ops}, ops


def test_a_max_pool_whose_indices_are_used_stays_in_torch():
    class Unpool(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)

        def forward(self, x):
            y, i = nn.functional.max_pool2d(self.conv(x), 2, return_indices=True)
            return nn.functional.max_unpool2d(y, i, 2)

    model, x = Unpool().eval(), torch.randn(1, 3, 8, 8)
    program = loom.from_torch(model, (x,))
    check(program(x), model, x, k=27)
    where = {p.op: p for p in program.placements}
    assert where["aten.max_pool2d_with_indices"].where == "torch"
    assert "indices are used" in where["aten.max_pool2d_with_indices"].reason


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



class ComputedBiasConv(nn.Module):
    """A conv2d whose bias is computed in the graph (bias * 2 + 1), in the conv's Loom group:
    not a parameter, so not folded; read in the kernel."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 2)

    def forward(self, x):
        return nn.functional.conv2d(x, self.conv.weight, self.conv.bias * 2 + 1)


class SequenceHeads(nn.Module):
    """A linear layer over a sequence (N, L, D): its matmul is 2-D, the view back to 3-D left
    pending in the trace; a relu of it and a scaled copy, two outputs."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 5)

    def forward(self, x):
        y = self.fc(x)
        return torch.relu(y), y * 2


def test_computed_bias_and_pending_reshapes_small_integers():
    """Small integers, exact against torch: a conv2d's computed bias is added, and a relu
    keeps the pending 3-D shape of a linear layer's result (both outputs come back)."""
    g = torch.Generator().manual_seed(21)
    conv, heads = ComputedBiasConv().eval(), SequenceHeads().eval()
    with torch.no_grad():
        for p in [*conv.parameters(), *heads.parameters()]:
            p.copy_(torch.randint(-2, 3, p.shape, generator=g).float())
    x = torch.randint(-3, 4, (2, 2, 5, 4), generator=g).float()
    program = loom.from_torch(conv, (x,))
    assert all(q.where == "loom" for q in program.ops), program.report()
    with torch.no_grad():
        assert torch.equal(program(x), conv(x))
    s = torch.randint(-3, 4, (2, 3, 6), generator=g).float()
    program = loom.from_torch(heads, (s,))
    assert all(q.where == "loom" for q in program.ops), program.report()
    with torch.no_grad():
        out, ref = program(s), heads(s)
    assert isinstance(out, tuple) and len(out) == 2
    for o, r in zip(out, ref):
        assert o.shape == r.shape and torch.equal(o, r)

def _integers(g, *shapes):
    """Small-integer float32 tensors (every sum below exact in float32)."""
    return [torch.randint(-3, 4, shape, generator=g).float() for shape in shapes]


def test_elementwise_ops_on_pending_reshapes():
    """A matmul of a 3-D tensor is a 2-D mm whose view back to 3-D is left pending in the trace;
    an elementwise op keeps it only for a number, a vector along the last dimension (also one of
    shape (1, 1, C)) or another pending reshape of the same shape from the same shape; else each
    operand is reshaped first: a full tensor, a vector of more dimensions, a reshape that changes
    the last dimension, one from another shape, two of one matrix that broadcast. Small integers,
    exact against torch, in one Loom kernel."""

    def ops(x, w, w2, v, b3, full, v4, v15, a, c, m1, m2, vec, row):
        y, z, m = x @ w.t(), x @ w2.t(), m1 @ m2
        return (y + z, y - v, y * b3, y + full, y + v4, y.reshape(2, 15) + v15, y + (a @ c).view(2, 3, 5),
                m.unsqueeze(0) + m.unsqueeze(1), m + vec.t(), m * row.expand(6, 5))

    g = torch.Generator().manual_seed(23)
    inputs = _integers(g, (2, 3, 4), (5, 4), (5, 4), (5,), (1, 1, 5), (2, 3, 5), (1, 1, 1, 5), (15,), (2, 3), (3, 15),
                       (6, 2), (2, 5), (5,), (1, 5))
    program = torchfx.compile_graph(ops, inputs)
    assert len(program.partitions) == 1 and all(q.where == "loom" for q in program.ops), program.report()
    with torch.no_grad():
        for k, (out, ref) in enumerate(zip(program(*inputs), ops(*inputs))):
            assert out.shape == ref.shape and torch.equal(out, ref), k


def test_elementwise_operands_beside_an_nhwc_conv_result():
    """An operand of an op with a conv2d's NHWC result that is not NHWC itself is made 4-D (a
    channel column (C, 1, 1), a vector along the width) and permuted, or only permuted (a 4-D
    transpose of the input). Small integers, exact against torch."""

    def ops(x, f, column, row):
        y = nn.functional.conv2d(x, f, padding=1)
        return y + column, y * row, y - x.transpose(2, 3)

    inputs = _integers(torch.Generator().manual_seed(24), (1, 2, 4, 4), (2, 2, 3, 3), (2, 1, 1), (4,))
    program = torchfx.compile_graph(ops, inputs)
    assert len(program.partitions) == 1 and all(q.where == "loom" for q in program.ops), program.report()
    with torch.no_grad():
        for k, (out, ref) in enumerate(zip(program(*inputs), ops(*inputs))):
            assert out.shape == ref.shape and torch.equal(out, ref), k


def test_a_group_loom_cannot_compile_stays_in_torch(monkeypatch):
    """A group whose kernel fails to build (an unknown pipeline) or to trace (an operation that
    raises) runs in torch, its error's first line in the report, beside a group that compiled
    and an op torch runs for its own reason; num_threads is torch's unless given."""
    inputs = _integers(torch.Generator().manual_seed(25), (3, 4), (4, 5), (5, 2))

    def fn(x, w, v):
        return torch.softmax(torch.relu(x @ w), 1) @ v

    def run(**options) -> list[str | None]:
        """The errors of the groups (the one with the relu first)."""
        program = torchfx.compile_graph(fn, inputs, **options)
        parts = sorted(program.partitions, key=lambda p: not any(n.target is torch.ops.aten.relu.default
                                                                  for n in p.graph_nodes))
        errors = [p.error for p in parts]
        failed = [f"Loom could not compile its group: {e}" if e else None for e in errors]
        assert [(q.op, q.where, q.reason) for q in program.ops] == [
            ("aten.mm", "torch" if errors[0] else "loom", failed[0]),
            ("aten.relu", "torch" if errors[0] else "loom", failed[0]),
            ("aten._softmax", "torch", "Loom has no operation for aten._softmax"),
            ("aten.mm", "torch" if errors[1] else "loom", failed[1])], program.report()
        compiled = sum(e is None for e in errors)
        report = program.report()
        assert f"4 ATen ops: {compiled + 2 * (errors[0] is None)} in Loom ({compiled} kernels)" in report, report
        assert f"loom kernel {parts[0].name}: aten.mm, aten.relu; left to torch: Loom could not compile it: " in report
        with torch.no_grad():
            out, ref = program(*inputs), fn(*(t.double() for t in inputs))
        assert (out.double() - ref).abs().max() <= 4 * 5 * EPS32 * ref.abs().max()
        assert parts[0].last_arrays is None  # (the kernel never ran)
        assert [p.jit.num_threads for p in parts] == [options.get("num_threads", torch.get_num_threads())] * 2
        return errors

    for threads in ({}, {"num_threads": 3}):
        errors = run(pipeline="no-such-pipeline", **threads)
        assert all(e.startswith("error: invalid pass pipeline 'no-such-pipeline'") and "\n" not in e for e in errors)
    traces = []

    def fails(message):
        def relu(_):
            traces.append(message)
            raise loom.LoomError(message) if message else ValueError()
        return relu

    monkeypatch.setattr(torchfx.F, "relu", fails("no relu today\nsecond line"))
    assert run() == ["error: no relu today", None]
    assert len(traces) == 1  # traced by prepare(); build() kept its error and traced nothing again
    monkeypatch.setattr(torchfx.F, "relu", fails(""))
    assert run() == ["ValueError", None]


def test_weights_a_matmul_reads_permuted():
    """A parameter read through permute (negative dimensions too) by mm and bmm is stored
    permuted, contiguous; an input's permute is read in the kernel. Small integers, exact."""

    class Permuted(nn.Module):
        def __init__(self, g):
            super().__init__()
            self.p, self.b = (nn.Parameter(t) for t in _integers(g, (5, 4), (2, 5, 4)))

        def forward(self, x, k, a):
            return x @ self.p.permute(1, 0) + x @ k.permute(-1, -2), torch.bmm(a, self.b.permute(0, -1, -2))

    g = torch.Generator().manual_seed(26)
    model = Permuted(g).eval()
    inputs = _integers(g, (3, 4), (5, 4), (2, 3, 4))
    program = loom.from_torch(model, inputs)
    with torch.no_grad():
        for out, ref in zip(program(*inputs), model(*inputs)):
            assert torch.equal(out, ref)
    [part] = program.partitions
    constants = part.last_arrays[len(inputs):]
    assert [c.shape for c in constants] == [(4, 5), (2, 4, 5)] and all(c.flags.c_contiguous for c in constants)
    assert np.array_equal(constants[1], model.b.detach().numpy().transpose(0, 2, 1))
    assert [n.endswith("_permuted") for n in inspect.signature(part._body_fn).parameters] == [False] * 3 + [True] * 2


def test_a_linear_node_in_a_partition():
    """aten.linear, which make_fx decomposes, traced from a graph made by hand: with a bias and
    without, on a 3-D input. Small integers, exact against torch."""
    aten = torch.ops.aten
    x, w, b = _integers(torch.Generator().manual_seed(27), (2, 3, 4), (5, 4), (5,))
    graph = torch.fx.Graph()
    places = [graph.placeholder(name) for name in ("x", "w", "b")]
    for p, t in zip(places, (x, w, b)):
        p.meta["val"] = t
    nodes = [graph.call_function(aten.linear.default, args) for args in [tuple(places), tuple(places[:2])]]
    for n in nodes:
        n.meta["val"] = torch.empty(2, 3, 5)
    graph.output(tuple(nodes))
    part = torchfx.LoomPartition("loom_linear", torch.fx.GraphModule(nn.Module(), graph), fixed=frozenset(),
                                 freeze=False, pipeline="default", num_threads=1, cache=True)
    assert part.prepare([x, w, b]) is not None
    part.build()
    assert part.error is None
    out = part(x, w, b)
    assert torch.equal(out[0], nn.functional.linear(x, w, b)) and torch.equal(out[1], nn.functional.linear(x, w))


def test_grouped_and_depthwise_convolutions_run_in_loom():
    """MobileNetV2's depthwise 3x3 (with its batch norm folded and ReLU6), a channel
    multiplier, and RegNet's groups of several channels: all in one Loom kernel."""
    torch.manual_seed(5)
    model = nn.Sequential(
        nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False), nn.BatchNorm2d(16), nn.ReLU6(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1, groups=16), nn.ReLU(),
        nn.Conv2d(32, 24, 3, padding=1, groups=4), nn.ReLU(), nn.Conv2d(24, 8, 1)).eval()
    with torch.no_grad():
        model[1].running_mean.uniform_(-1, 1)
        model[1].running_var.uniform_(0.5, 2)
    x = torch.randn(2, 16, 11, 9)
    program = loom.from_torch(model, (x,))
    check(program(x), model, x, k=9 + 9 + 9 * 8 + 24)
    assert all(p.where == "loom" for p in program.placements), program.report()
    assert len(program.partitions) == 1


def test_refusals_are_left_to_torch_with_the_reason():
    torch.manual_seed(4)
    transposed = nn.Sequential(nn.ConvTranspose2d(4, 8, 3), nn.ReLU(), nn.Conv2d(8, 8, 1)).eval()
    x = torch.randn(1, 4, 6, 6)
    program = loom.from_torch(transposed, (x,))
    check(program(x), transposed, x, k=36 + 8)
    first = program.placements[0]
    assert first.where == "torch" and "transposed convolution" in first.reason, first
    # a half-precision layer stays in torch (its result is torch's own, bit for bit)
    half = nn.Linear(8, 4).half().eval()
    xh = torch.randn(2, 8).half()
    program = loom.from_torch(half, (xh,))
    assert not program.partitions
    assert any("dtype float16" in (p.reason or "") for p in program.placements)
    with torch.no_grad():
        assert torch.equal(program(xh), half(xh))


class MobileBlock(nn.Module):
    """MobileNetV2's ops around a depthwise conv (which stays in torch): a 1x1 conv, batch
    norm and ReLU6 (aten.hardtanh 0..6), then hardtanh and clamp with their own bounds."""

    def __init__(self):
        super().__init__()
        self.expand = nn.Sequential(nn.Conv2d(4, 12, 1, bias=False), nn.BatchNorm2d(12), nn.ReLU6())
        self.project = nn.Conv2d(12, 6, 3, padding=1)
        self.fc = nn.Linear(6 * 5 * 7, 9)

    def forward(self, x):
        y = nn.functional.hardtanh(self.project(self.expand(x)), -0.5, 0.75)
        return torch.clamp(self.fc(y.flatten(1)), -1.0, 2.0)


def test_relu6_hardtanh_and_clamp_run_in_loom():
    """ReLU6, hardtanh and clamp with both bounds are loom.clamp in the conv's and the
    linear layer's epilogues: against float64, NaN kept where torch keeps it."""
    torch.manual_seed(3)
    model = _randomize_bn(MobileBlock()).eval()
    with torch.no_grad():
        model.expand[0].weight.mul_(4)  # (past ReLU6's 6, below 0: both bounds bite)
    x = torch.randn(2, 4, 5, 7)
    out, ran = programs(compiled(model), x)
    check(out, model, x, k=4 + 108 + 210)
    report = ran[0].report()
    assert "9 ATen ops: 9 in Loom (1 kernels), 0 in torch" in report, report
    assert "aten.hardtanh x2" in report and "aten.clamp" in report, report
    x[0, 0, 0, 0] = float("nan")
    out, _ = programs(compiled(model), x)
    with torch.no_grad():
        assert torch.equal(torch.isnan(out), torch.isnan(model(x)))


def test_a_one_sided_clamp_stays_in_torch():
    """clamp(x, min=...) alone, or with bounds the wrong way round, stays in torch with the
    reason; clamp with both bounds runs in Loom."""

    def fn(x, w):
        y = x @ w
        return torch.clamp(y, min=0.5), torch.clamp(y, 1.0, -1.0), torch.clamp(y, -1.0, 1.0)

    x, w = torch.randn(4, 3), torch.randn(3, 5)
    program = torchfx.compile_graph(fn, [x, w])
    reasons = [(q.op, q.where, q.reason) for q in program.ops if q.op == "aten.clamp"]
    assert reasons == [("aten.clamp", "torch", "a clamp with one bound alone (Loom's clamp takes both)"),
                       ("aten.clamp", "torch", "a clamp whose min (1.0) is larger than its max (-1.0)"),
                       ("aten.clamp", "loom", None)], program.report()


def test_every_refusal_names_its_reason():
    """One graph of ops Loom refuses, each for its own reason (nothing compiled): a 0-d result,
    a mixed-dtype add, a 0-d operand, a bool operand, a transposed, a 1-D and a 3-D convolution,
    a batch norm of computed statistics, one of a 1-D tensor (which fake tensors capture and eager
    refuses), a view of a tensor off the CPU."""
    F = nn.functional

    def refused(x, s, d, x1, xt, f2, x3, f3, x5, f5, m, v):
        return (torch.relu(s), x + d, x + s, torch.add(x, True), F.conv_transpose2d(xt, f2), F.conv1d(x3, f3),
                F.conv3d(x5, f5), F.batch_norm(x, m * 2, v),
                torch.ops.aten._native_batch_norm_legit_no_training(x1, None, None, m, v, 0.1, 1e-5)[0],
                torch.ones(2, 3, device="meta").t())

    g = torch.Generator().manual_seed(22)
    shapes = [(4, 3), (), (4, 3), (3,), (1, 2, 3, 3), (2, 3, 2, 2), (1, 2, 5), (4, 2, 2), (1, 1, 3, 3, 3),
              (2, 1, 2, 2, 2), (3,)]
    inputs = [torch.randn(shape, generator=g) for shape in shapes]
    inputs[2] = inputs[2].double()
    inputs.append(torch.rand(3, generator=g) + 1)
    program = torchfx.compile_graph(refused, inputs)
    assert not program.partitions and program.whole_reason is None
    mine = "no matmul or conv2d in its group"
    assert [(q.op, q.where, q.reason) for q in program.ops] == [
        ("aten.relu", "torch", "a 0-d tensor"),
        ("aten.add.Tensor", "torch", "an operand of dtype float32 for a float64 result (a mixed-dtype op; Loom mixes float32 "
                                             "and bfloat16 alone)"),
        ("aten.add.Tensor", "torch", "a 0-d tensor operand"),
        ("aten.add.Tensor", "torch", "an operand that is neither a tensor nor a number"),
        ("aten.convolution", "torch", "a transposed convolution"),
        ("aten.convolution", "torch", "a 1-D convolution (Loom's conv2d is 2-D)"),
        ("aten.convolution", "torch", "a 3-D convolution (Loom's conv2d is 2-D)"),
        ("aten.mul.Tensor", "torch", f"{mine} (elementwise ops and views alone stay in torch)"),
        ("aten.native_batch_norm", "torch", "a batch norm whose parameters are computed in the graph"),
        ("aten._native_batch_norm_legit_no_training", "torch", "a batch norm of a 1-D tensor"),
        ("aten.ones", "torch", "Loom has no operation for aten.ones"),
        ("aten.t", "torch", "a tensor on meta (Loom runs on the CPU)")], program.report()


def test_refusals_of_nodes_no_capture_makes():
    """LoomSupport on nodes built by hand (make_fx decomposes aten.linear and folds an op on
    numbers): a node without a tensor value, an add of two numbers, and a linear layer accepted on
    a 3-D tensor, refused on a 4-D one."""
    graph = torch.fx.Graph()

    def node(target, args, val):
        n = graph.call_function(target, args) if target is not None else graph.placeholder(f"p{len(graph.nodes)}")
        if val is not None:
            n.meta["val"] = val
        return n

    aten = torch.ops.aten
    x3, x4, w = (node(None, (), torch.empty(shape)) for shape in [(2, 3, 4), (2, 2, 3, 4), (5, 4)])
    cases = [(node(aten.relu.default, (x3,), None), "its result is not a tensor"),
             (node(aten.add.Tensor, (2.0, 3.0), torch.empty(1)), "an op on numbers alone"),
             (node(aten.mul.Tensor, (x3, 2.0), torch.empty(2, 3, 4)), None),
             (node(aten.linear.default, (x3, w), torch.empty(2, 3, 5)), None),
             (node(aten.linear.default, (x4, w), torch.empty(2, 2, 3, 5)),
              "a linear layer on a tensor of more than 3 dimensions")]
    support = torchfx.LoomSupport()
    for n, reason in cases:
        assert support.is_node_supported({}, n) is (reason is None)
        assert support.reasons.get(n) == reason
    assert not support.is_node_supported({}, x3) and x3 not in support.reasons  # a placeholder: no op to run


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


class ConvBnLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.fc = nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4), nn.Linear(4 * 5 * 5, 6)

    def forward(self, x):
        return self.fc(torch.flatten(torch.relu(self.bn(self.conv(x))), 1))


def test_a_float64_model_runs_in_loom_in_float64():
    """Every constant (a filter with its batch norm folded in, a transposed weight, a batch
    norm's scale and shift) is made in the model's dtype: float64 throughout, within float64's
    rounding of torch's own float64 result."""
    torch.manual_seed(29)
    model = _randomize_bn(nn.Sequential(ConvBnLinear(), nn.BatchNorm1d(6))).double().eval()
    x = torch.randn(2, 3, 7, 7, dtype=torch.float64)
    program = loom.from_torch(model, (x,))
    assert program.partitions and all(q.where == "loom" for q in program.ops), program.report()
    with torch.no_grad():
        out, ref = program(x), model(x)
    assert out.dtype == torch.float64 and out.shape == ref.shape
    assert (out - ref).abs().max() <= 4 * (27 + 100 + 2) * np.finfo(np.float64).eps * ref.abs().max()
    assert all(a.dtype == np.float64 for a in program.partitions[0].last_arrays)


def test_folded_parameters_follow_writes_that_keep_the_version():
    """Writes through `.data` and numpy views change neither the storage nor the version
    counter; the folded filter, batch norm and transposed weight still follow them, down to a
    single element (issue 27, item 2)."""
    torch.manual_seed(11)
    model = _randomize_bn(ConvBnLinear()).eval()
    x = torch.randn(2, 3, 7, 7)
    program = loom.from_torch(model, (x,))
    fast = compiled(model)
    writes = [lambda: model.conv.weight.data.mul_(2.0),
              lambda: model.fc.weight.data.copy_(torch.randn(6, 100)),
              lambda: model.bn.running_var.data.mul_(3.0),
              lambda: model.conv.weight.detach().numpy().__setitem__((1, 2, 0, 1), 5.0),
              lambda: model.bn.running_mean.detach().numpy().__setitem__(3, -2.0),
              lambda: model.fc.weight.detach().numpy().__setitem__((0, 7), 9.0)]
    with torch.no_grad():
        for write in [lambda: None, *writes]:
            write()
            check(program(x), model, x, k=27 + 100)
            check(fast(x), model, x, k=27 + 100)


def test_a_buffer_refilled_through_numpy_is_read_at_each_call():
    """An input a matmul reads through .t() is no parameter: it is read in place at each call,
    never kept from the first (issue 27, item 3: a torch.from_numpy buffer refilled between
    calls, same identity, pointer and version)."""
    fast = compiled(lambda q, k: q @ k.t())
    g = np.random.default_rng(9)
    q = torch.from_numpy(g.integers(-3, 4, (5, 6)).astype(np.float32))
    buffer = np.zeros((7, 6), np.float32)
    k = torch.from_numpy(buffer)
    with torch.no_grad():
        for _ in range(3):
            buffer[...] = g.integers(-3, 4, buffer.shape)
            assert np.array_equal(fast(q, k).numpy(), q.numpy() @ buffer.T)


def test_side_effects_happen_once_per_call():
    """Capture runs on fake tensors: a model that scales its input in place, and a batch norm
    recalibrated in training mode under no_grad, change their tensors once per call, as eager
    does (issue 27, items 4 and 5: three times on the first call)."""

    class Scales(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            x.mul_(2.0)
            return self.fc(x)

    model = Scales().eval()
    with torch.no_grad():
        model.fc.weight.copy_(torch.arange(12.0).reshape(3, 4) - 6)
    program, fast = loom.from_torch(model, (torch.ones(2, 4),)), compiled(model)
    for run in (program, fast):
        x = torch.ones(2, 4)
        with torch.no_grad():
            for calls in (1, 2):
                y = run(x)
                assert torch.equal(x, torch.full((2, 4), 2.0 ** calls))
                assert torch.equal(y, model.fc(x.clone()))
    torch.manual_seed(12)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).train()
    eager = _double(net).float()
    fast = compiled(net)
    x = torch.randn(2, 3, 6, 6)
    with torch.no_grad():
        for calls in (1, 2):
            check(fast(x), eager, x, k=27)
            eager(x)
            assert net[1].num_batches_tracked.item() == calls
            for name in ("running_mean", "running_var"):
                assert torch.allclose(getattr(net[1], name), getattr(eager[1], name), rtol=1e-5, atol=1e-6), name


def test_inference_mode_tensors():
    """Parameters and inputs made under torch.inference_mode() track no version counter
    (issue 27, item 12): they run, and writes to them are followed."""
    torch.manual_seed(13)
    with torch.inference_mode():
        model = _randomize_bn(nn.Sequential(ConvBnRelu(3, 4), nn.Flatten(), nn.Linear(4 * 5 * 5, 3))).eval()
        x = torch.randn(1, 3, 5, 5)
        program, fast = loom.from_torch(model, (x,)), compiled(model)
        for write in (lambda: None, lambda: model[0][0].weight.mul_(-1.0), lambda: model[2].weight.add_(1.0)):
            write()
            check(program(x), model, x, k=27 + 100)
            check(fast(x), model, x, k=27 + 100)


def test_a_float_that_changes_between_calls():
    """A Python float argument or attribute (a scale, a batch norm's eps) that changes between
    calls: dynamo passes it as a tensor read with .item() once it changed (issue 27, item 12:
    the capture failed in aten._local_scalar_dense); the number's uses run in torch."""

    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.bn, self.scale = nn.Linear(6, 5), nn.BatchNorm1d(5), 0.5

        def forward(self, x, shift):
            return self.bn(self.fc(x) * self.scale) + shift

    torch.manual_seed(14)
    model = _randomize_bn(Scaled()).eval()
    torch._dynamo.reset()
    fast = torch.compile(model, backend=loom.torch_backend)  # (dynamic=False would compile again per value)
    x = torch.randn(3, 6)
    with torch.no_grad(), torchfx.recording() as ran:
        for scale, eps, shift in [(0.5, 1e-5, 0.25), (1.5, 1e-5, 0.25), (1.5, 1e-5, -2.0), (2.5, 0.5, 3.0),
                                  (-1.0, 2.0, 1.0)]:
            model.scale, model.bn.eps = scale, eps
            assert torch.allclose(fast(x, shift), model(x, shift), rtol=1e-5, atol=1e-5), (scale, eps, shift)
    assert any(p.partitions for p in ran[1:]), "the linear layer left Loom once the numbers changed"


def test_a_from_torch_program_is_fixed_to_its_example():
    """Another batch size, dtype, a replaced parameter of another shape, a changed attribute
    or training mode: a clear error that says what to do, never a reshape error from inside
    Loom or a result for the old attributes (issue 27, item 13)."""
    model = _randomize_bn(nn.Sequential(ConvBnRelu(3, 4), nn.Flatten(), nn.Linear(4 * 5 * 5, 3))).eval()
    program = loom.from_torch(model, (torch.randn(2, 3, 5, 5),))
    again = r"call compiler.from_torch\(model, example\) again, or use torch.compile"
    with pytest.raises(ValueError, match=r"input #0 is \(5, 3, 5, 5\) float32, \(2, 3, 5, 5\) float32 in the "
                                         r"example: a from_torch program is fixed to its example's shapes.*" + again):
        program(torch.randn(5, 3, 5, 5))
    with pytest.raises(ValueError, match=r"input #0 is \(2, 3, 5, 5\) float64"):
        program(torch.randn(2, 3, 5, 5, dtype=torch.float64))
    with pytest.raises(TypeError, match="this program takes 1 inputs"):
        program(torch.randn(2, 3, 5, 5), torch.randn(2))
    model[0][1].eps = 0.1
    with pytest.raises(ValueError, match=r"attribute 0.1.eps is 0.1, 1e-05 when from_torch captured it.*" + again):
        program(torch.randn(2, 3, 5, 5))
    model[0][1].eps = 1e-5
    model[0][0].stride = (2, 2)  # (a tuple of numbers)
    with pytest.raises(ValueError, match=r"attribute 0.0.stride is \(2, 2\), \(1, 1\) when from_torch captured it"):
        program(torch.randn(2, 3, 5, 5))
    model[0][0].stride = (1, 1)
    model.train()
    with pytest.raises(ValueError, match=r"training mode.*model.eval\(\)"):
        program(torch.randn(2, 3, 5, 5))
    model.eval()
    model[2].weight = nn.Parameter(torch.randn(3, 50))
    with pytest.raises(ValueError, match=r"2.weight is \(3, 50\) float32, \(3, 100\) float32 in the example"):
        program(torch.randn(2, 3, 5, 5))


def test_from_torch_takes_a_module_and_its_example():
    """A function is refused; a bare tensor is an example of one input; a call with fewer
    inputs than the example, or after an attribute was added to the model, is refused."""
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU()).eval()
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():  # small integers: the sums are exact, whatever their order
        for p in model.parameters():
            p.copy_(torch.randint(-2, 3, p.shape, generator=g).float())
    x = torch.randint(-3, 4, (2, 4), generator=g).float()
    with pytest.raises(TypeError, match="from_torch takes a torch.nn.Module, got function"):
        loom.from_torch(lambda x: model(x), (x,))
    program = loom.from_torch(model, x)
    with torch.no_grad():
        assert torch.equal(program(x), model(x))
    with pytest.raises(TypeError, match="this program takes 1 inputs \\(as its example\\), got 0"):
        program()
    model[1].scale = 2.0
    with pytest.raises(ValueError, match="the model's attribute 1.scale is 2.0, None when from_torch captured it"):
        program(x)
    del model[1].scale
    model[1]._mark = True  # a private attribute (torch's own marks are): not the capture's
    with torch.no_grad():
        assert torch.equal(program(x), model(x))


def test_freeze_trusts_the_parameters():
    """freeze=True folds at the first call and never compares again (documented: for
    parameters that never change); the default sees a write through .data."""
    torch.manual_seed(15)
    model = _randomize_bn(nn.Sequential(ConvBnRelu(3, 4))).eval()
    x = torch.randn(1, 3, 6, 6)
    checked, frozen = loom.from_torch(model, (x,)), loom.from_torch(model, (x,), freeze=True)
    with torch.no_grad():
        before = model(x)
        check(frozen(x), model, x, k=27)
        model[0][0].weight.data.mul_(-1.0)
        check(checked(x), model, x, k=27)
        assert torch.allclose(frozen(x), before, rtol=1e-5, atol=1e-6)  # the old filter, as documented


def test_freeze_trusts_parameters_alone():
    """Under freeze=True a weight that is an argument, not a parameter (read through .t() by a
    matmul, or a conv2d's filter), is still read at each call: small integers, exact; so are a
    batch norm's statistics passed as arguments (its scale and shift made again at each call)."""
    g = np.random.default_rng(18)
    fast = compiled(lambda q, k, x, f, mean, var: (q @ k.t(), nn.functional.conv2d(x, f),
                                                   nn.functional.batch_norm(q @ k.t(), mean, var)), freeze=True)
    q, x = torch.from_numpy(g.integers(-3, 4, (5, 6)).astype(np.float32)), torch.ones(1, 2, 4, 4)
    for _ in range(3):
        k, f = (torch.from_numpy(g.integers(-3, 4, shape).astype(np.float32)) for shape in [(7, 6), (3, 2, 2, 2)])
        mean, var = torch.from_numpy(g.uniform(-4, 4, 7).astype(np.float32)), torch.rand(7) + 0.5
        (attention, conv, norm), ran = programs(fast, q, k, x, f, mean, var)
        ref = nn.functional.batch_norm(q.double() @ k.double().t(), mean.double(), var.double())
        assert torch.allclose(norm.double(), ref, rtol=8 * 6 * EPS32, atol=8 * 6 * EPS32 * ref.abs().max().item())
        assert ran[0].partitions, ran[0].report()
        assert np.array_equal(attention.numpy(), q.numpy() @ k.numpy().T)
        assert np.array_equal(conv.numpy(), np.broadcast_to(f.numpy().sum(axis=(1, 2, 3))[None, :, None, None],
                                                            (1, 3, 3, 3)))


def test_freeze_folds_a_conv_with_parameters_alone():
    """Under freeze=True a conv2d whose filter is a parameter is folded only when its bias is one
    too, a batch norm into it only when its statistics are buffers: a bias or statistics passed
    as arguments are read at each call (small integers: the conv exact)."""

    class Arguments(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 3, 2, bias=False)

        def forward(self, x, bias, mean, var):
            return (nn.functional.conv2d(x, self.conv.weight, bias),
                    nn.functional.batch_norm(self.conv(x), mean, var))

    g = torch.Generator().manual_seed(28)
    model = Arguments().eval()
    x, model.conv.weight.data = _integers(g, (1, 2, 4, 4), (3, 2, 2, 2))
    fast = compiled(model, freeze=True)
    for _ in range(3):
        bias, mean = _integers(g, (3,), (3,))
        var = torch.rand(3, generator=g) + 0.5
        (conv, norm), ran = programs(fast, x, bias, mean, var)
        assert ran[0].partitions and all(q.where == "loom" for q in ran[0].ops), ran[0].report()
        with torch.no_grad():
            ref_conv, ref_norm = _double(model)(x.double(), bias.double(), mean.double(), var.double())
        assert torch.equal(conv.double(), ref_conv)
        assert (norm.double() - ref_norm).abs().max() <= 4 * 9 * EPS32 * ref_norm.abs().max()


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
       hw=st.tuples(st.integers(3, 13), st.integers(3, 13)),
       kernel=st.tuples(st.sampled_from([1, 2, 3]), st.sampled_from([1, 2, 3])),
       stride=st.sampled_from([1, 2]), padding=st.sampled_from([0, 1]), dilation=st.sampled_from([1, 2]),
       bias=st.booleans(), bn=st.booleans())
def test_random_conv_layers(n, c, f, hw, kernel, stride, padding, dilation, bias, bn):
    if any(d + 2 * padding - dilation * (r - 1) - 1 < 0 for d, r in zip(hw, kernel)):
        return
    torch.manual_seed(6)
    layers = [nn.Conv2d(c, f, kernel, stride, padding, dilation, bias=bias)] + ([nn.BatchNorm2d(f)] if bn else [])
    model = _randomize_bn(nn.Sequential(*layers, nn.ReLU())).eval()
    x = torch.randn(n, c, *hw)
    program = loom.from_torch(model, (x,))
    assert program.partitions and program.partitions[0].error is None
    check(program(x), model, x, k=c * kernel[0] * kernel[1] + 1)


#: how much larger Winograd's componentwise bound is than the direct convolution's, per tile
WINOGRAD_GROWTH = {m: winograd_growth(m) for m in (2, 4)}


@settings(deadline=None, max_examples=20)
@given(n=st.sampled_from([1, 2]), c=st.sampled_from([1, 3, 16]), f=st.sampled_from([1, 4, 17]),
       hw=st.tuples(st.integers(1, 13), st.integers(1, 13)), padding=st.sampled_from([0, 1, 2]),
       tile=st.sampled_from([2, 4]), bias=st.booleans(), bn=st.booleans())
def test_random_convs_by_winograd_match_eager(n, c, f, hw, padding, tile, bias, bn):
    """algorithms="fast" with the cost model's choice forced to `tile`: every 3x3 stride-1
    conv runs by Winograd, its filter (with the batch norm folded in) transformed as it is
    folded; within the direct bound times Winograd's growth."""
    if any(d + 2 * padding < 3 for d in hw):
        return
    torch.manual_seed(7)
    layers = [nn.Conv2d(c, f, 3, 1, padding, bias=bias)] + ([nn.BatchNorm2d(f)] if bn else [])
    model = _randomize_bn(nn.Sequential(*layers, nn.ReLU())).eval()
    x = torch.randn(n, c, *hw)
    forced = cost_model.WinogradChoice(tile, "forced by the test", {})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torchfx, "choose_winograd", lambda *args, **kwargs: forced)
        program = loom.from_torch(model, (x,), algorithms="fast")
    [part] = program.partitions
    assert part.error is None and list(part.winograd_tiles.values()) == [tile]
    assert "loom.winograd_input" in part.jit.specialize(*part._example).source
    check(program(x), model, x, k=WINOGRAD_GROWTH[tile] * (9 * c + 8 * (tile + 2)))


def test_winograd_filters_follow_in_place_changes():
    """Not frozen: a changed weight or batch norm is folded, and transformed, again."""
    torch.manual_seed(8)
    model = _randomize_bn(nn.Sequential(ConvBnRelu(16, 32), ConvBnRelu(32, 32))).eval()
    x = torch.randn(1, 16, 28, 28)
    program = loom.from_torch(model, (x,), algorithms="fast")
    assert list(program.partitions[0].winograd_tiles.values()) == [4, 4]  # the cost model's choice
    k = WINOGRAD_GROWTH[4] * (9 * 16 + 9 * 32 + 96)
    check(program(x), model, x, k=k)
    with torch.no_grad():
        model[1][1].running_var.mul_(4.0)
        model[0][0].weight.add_(0.25)
    check(program(x), model, x, k=k)
    exact = loom.from_torch(model, (x,))
    assert not exact.partitions[0].winograd_tiles


#: the layers of the panel fuzzers (with c and hw): NR = 4 or 1 (F itself: one panel)
PANEL_CONVS = dict(n=st.sampled_from([1, 2]), f=st.sampled_from([4, 12, 32]), window=st.sampled_from([1, 3]),
                   stride=st.sampled_from([1, 2]), padding=st.sampled_from([0, 1]), nr=st.sampled_from([1, 4]),
                   bias=st.booleans(), bn=st.booleans())


def conv_bn_relu(c, f, window, stride, padding, bias, bn, seed):
    torch.manual_seed(seed)
    layers = [nn.Conv2d(c, f, window, stride, padding, bias=bias)] + ([nn.BatchNorm2d(f)] if bn else [])
    return _randomize_bn(nn.Sequential(*layers, nn.ReLU()), seed).eval()


def in_panels(model, x, width):
    """`from_torch` with every folded filter's panel width forced to `width`; the program
    and its conv2d lines."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torchfx, "filter_panel", lambda *args: width)
        program = loom.from_torch(model, (x,))
    [part] = program.partitions
    assert part.error is None and list(part.filter_panels.values()) == [width]
    return program, [line for line in part.jit.specialize(*part._example).source.splitlines() if "loom.conv2d" in line]


@settings(deadline=None, max_examples=20)
@given(c=st.sampled_from([1, 3, 16]), hw=st.tuples(st.integers(1, 11), st.integers(1, 11)), **PANEL_CONVS)
def test_random_convs_with_filters_in_panels_match_eager(n, c, f, hw, window, stride, padding, nr, bias, bn):
    """The panel width forced (NR = 4 or 1, or F itself: one panel): every conv's folded
    filter, batch norm included, packed in panels; within the direct bound of eager."""
    if any(d + 2 * padding < window for d in hw):
        return
    model = conv_bn_relu(c, f, window, stride, padding, bias, bn, 11)
    x = torch.randn(n, c, *hw)
    width = nr if nr > 1 else f
    program, lines = in_panels(model, x, width)
    filters = [re.search(r", tensor<([0-9x]+)xf32>\) -> ", line).group(1) for line in lines]
    assert filters == [f"{f // width}x{window}x{window}x{c}x{width}"], filters
    check(program(x), model, x, k=window * window * c + 2)


def test_filters_larger_than_l2_are_folded_into_panels(monkeypatch):
    """A folded filter larger than L2 (a 64 KiB L2 here, through LOOM_TARGET) is packed in
    panels of the register tile's width when folded (`cost_model.filter_panel`), so the
    conv reads it in place; the same results as eager's. Not frozen: a changed weight is
    folded and packed again."""
    monkeypatch.setenv("LOOM_TARGET", "l2=65536")
    torch.manual_seed(9)
    model = _randomize_bn(nn.Sequential(ConvBnRelu(32, 64), ConvBnRelu(64, 64, stride=2))).eval()
    x = torch.randn(1, 32, 14, 14)
    program = loom.from_torch(model, (x,))
    panels = program.partitions[0].filter_panels
    assert len(panels) == 2 and all(64 % nr == 0 for nr in panels.values()), panels
    k = 9 * 32 + 9 * 64 + 128
    check(program(x), model, x, k=k)
    with torch.no_grad():
        model[1][0].weight.add_(0.25)
        model[0][1].running_mean.add_(0.5)
    check(program(x), model, x, k=k)
    monkeypatch.setenv("LOOM_TARGET", "l2=1048576")
    assert not loom.from_torch(model, (x,)).partitions[0].filter_panels  # 144 KiB: HWCF


class _Pools(nn.Module):
    def __init__(self, c, f, pool, mean):  # a conv, relu, the pool, the mean (dims, keepdim) + 1
        super().__init__()
        self.conv, self.pool, self.mean = nn.Conv2d(c, f, 3, padding=1), pool, mean

    def forward(self, x):
        y = self.pool(torch.relu(self.conv(x)))
        if self.mean is None:
            return y
        dims, keep = self.mean
        return y.mean(dims, keepdim=keep) + 1


@settings(deadline=None, max_examples=25)
@given(n=st.sampled_from([1, 2]), c=st.sampled_from([1, 3]), f=st.sampled_from([1, 5, 16, 17]),
       hw=st.tuples(st.integers(2, 11), st.integers(2, 11)), window=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       stride=st.sampled_from([None, 1, 2, (1, 2)]), data=st.data())
def test_random_pools_and_means_match_eager(n, c, f, hw, window, stride, data):
    """A conv then a max or average pool (any window, stride and padding up to half the
    window; the average counting the padding or not) and a mean over some of its dimensions,
    kept or not, against torch eager: in one Loom kernel, NHWC inside, a max pool's maximum
    exactly torch's (the same f32 values)."""
    padding = (data.draw(st.integers(0, window[0] // 2)), data.draw(st.integers(0, window[1] // 2)))
    if any(d + 2 * p < k for d, p, k in zip(hw, padding, window)):
        return
    dims = data.draw(st.sampled_from([None, (2, 3), (-1, -2), (1,), (3,), (0, 2)]))
    mean = None if dims is None else (dims, data.draw(st.booleans()))
    average = data.draw(st.sampled_from([None, True, False]))  # max, or avg counting the padding or not
    pool = (nn.MaxPool2d(window, stride, padding) if average is None
            else nn.AvgPool2d(window, stride, padding, count_include_pad=average))
    torch.manual_seed(8)
    model = _Pools(c, f, pool, mean).eval()
    x = torch.randn(n, c, *hw)
    program = loom.from_torch(model, (x,))
    assert all(p.where == "loom" for p in program.ops), program.report()
    check(program(x), model, x, k=c * 9 + 1 + window[0] * window[1] + hw[0] * hw[1])
    if mean is None and average is None:  # the max pool alone: exactly torch's maximum of the conv's values
        conv = loom.from_torch(nn.Sequential(model.conv, nn.ReLU()).eval(), (x,))
        with torch.no_grad():
            assert torch.equal(program(x), model.pool(conv(x)))


def test_small_integers_are_exact():
    """Integer-valued inputs and weights: every sum is exact in f32, so Loom equals torch bit for bit
    (a 3 x 2 filter: its rows and columns are not interchangeable)."""
    model = nn.Sequential(nn.Conv2d(3, 5, (3, 2), padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(5 * 6 * 7, 4)).eval()
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

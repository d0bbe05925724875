"""The torch backend against torch eager, call by call, over mutation semantics (issue 27).

Small models (a Linear stack, Conv2d + BatchNorm2d + ReLU with a Linear head, `q @ k.t()` of a
buffer and of an input refilled through numpy, a model that scales its input in place) run
through `torch.compile(backend=compiler.torch_backend)` and `compiler.from_torch`, compiled
once; hypothesis draws sequences of changes applied alike to them and to eager's deep copy:
parameters, buffers and inputs written by every route (`.data`, a numpy view whole or one
element, `copy_`, `load_state_dict`, a new tensor in place of the old), an SGD step, a pass
in training mode under no_grad (batch norm recalibration), all of it again under
torch.inference_mode(); and Python floats (an argument, attributes, a batch norm's eps). After
each change both run, and the outputs, the buffers and the inputs must agree. Skipped when
torch is not installed (it is the `torch` extra)."""

import copy
import dataclasses
import functools
from collections.abc import Callable

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import compiler as loom  # noqa: E402
from compiler.frontends import torch_fx as torchfx  # noqa: E402

nn = torch.nn
EPS32 = float(np.finfo(np.float32).eps)


class ConvBn(nn.Sequential):
    def __init__(self):
        super().__init__(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))


class Mobile(nn.Sequential):
    """A 1x1 conv, batch norm and ReLU6, a depthwise 3x3 conv and its batch norm (loom.conv2d's
    groups, the batch norm folded into its filter), a linear layer and a hardtanh (loom.clamp
    both)."""

    def __init__(self):
        super().__init__(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4), nn.ReLU6(),
                         nn.Conv2d(4, 4, 3, padding=1, groups=4, bias=False), nn.BatchNorm2d(4), nn.Flatten(),
                         nn.Linear(4 * 6 * 6, 3), nn.Hardtanh(-0.5, 0.5))


class Attention(nn.Module):
    """q @ k.t() of a buffer (folded, checked) and of an input (read at each call)."""

    def __init__(self):
        super().__init__()
        self.q = nn.Linear(6, 5)
        self.register_buffer("k", torch.randn(7, 5))

    def forward(self, x, keys):
        q = self.q(x)
        return torch.relu(q @ self.k.t()) + q @ keys.t()


class ScalesInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4)

    def forward(self, x):
        x.mul_(0.5)
        return self.fc(x)


def _inputs(kind: str) -> list:
    g = np.random.default_rng(1)
    if kind in ("convbn", "mobile"):
        return [torch.from_numpy(g.standard_normal((2, 3, 6, 6)).astype(np.float32))]
    x = torch.from_numpy(g.standard_normal((4, 6)).astype(np.float32))
    return [x, torch.from_numpy(g.standard_normal((7, 5)).astype(np.float32))] if kind == "attention" else [x]


MODELS = {"mlp": lambda: nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 4)), "convbn": ConvBn,
          "attention": Attention, "inplace": ScalesInput, "mobile": Mobile}
K = {"mlp": 6 + 8, "convbn": 27 + 64, "attention": 6 + 5 + 5, "inplace": 6, "mobile": 3 + 9 + 144}  # the reduction lengths


@dataclasses.dataclass
class Side:
    """One side of the comparison: a model, its inputs, and what runs them (the backend, or eager)."""

    model: nn.Module
    inputs: list
    run: Callable
    start: dict = dataclasses.field(default_factory=dict)  # the values it was compiled with

    def call(self):
        with torch.no_grad():
            return self.run(*self.inputs)

    def restart(self, inference: bool) -> None:
        """Back to the values it was compiled with, written into the tensors it has now (a
        write the backend must follow like any other), so that examples do not compound:
        500 of them scaling a weight by 1.5 overflow to infinity."""
        with torch.inference_mode(inference), torch.no_grad():
            self.model.load_state_dict({k: v for k, v in self.start.items() if not k.startswith("input")})
            for i, x in enumerate(self.inputs):
                x.copy_(self.start[f"input{i}"])

    def tensor(self, target: str) -> torch.Tensor:
        if target.startswith("input"):
            return self.inputs[int(target.removeprefix("input"))]
        params = dict(self.model.named_parameters())
        return params[target] if target in params else self.model.get_buffer(target)


@functools.cache
def _compiled(kind: str, backend: str, inference: bool) -> Side:
    """The model of this kind through the backend, compiled once (each of hypothesis's examples
    starts from these values again, `Side.restart`, and compares against a deep copy)."""
    with torch.inference_mode(inference):
        torch.manual_seed(3)
        model = MODELS[kind]().eval()
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)
        inputs = _inputs(kind)
        if backend == "from_torch":
            run = loom.from_torch(model, inputs)
        else:
            torch._dynamo.reset()
            run = torch.compile(model, backend=loom.torch_backend)
        start = {**{k: v.clone() for k, v in model.state_dict().items()},
                 **{f"input{i}": x.clone() for i, x in enumerate(inputs)}}
    return Side(model, inputs, run, start)


def _new(target: str, shape, rng: np.random.Generator) -> np.ndarray:
    values = rng.uniform(0.5, 2.0, shape) if "running_var" in target else rng.standard_normal(shape) * 0.5
    return np.asarray(values, np.float32)


def data_mul(side, target, rng):
    side.tensor(target).data.mul_(1.5)


def data_copy(side, target, rng):
    t = side.tensor(target)
    t.data.copy_(torch.from_numpy(_new(target, t.shape, rng)))


def numpy_element(side, target, rng):
    a = side.tensor(target).detach().numpy()
    a[tuple(int(rng.integers(0, d)) for d in a.shape)] = _new(target, (), rng)


def numpy_whole(side, target, rng):
    a = side.tensor(target).detach().numpy()
    a[...] = _new(target, a.shape, rng)


def copy_(side, target, rng):
    t = side.tensor(target)
    with torch.no_grad():
        t.copy_(torch.from_numpy(_new(target, t.shape, rng)))


def load_state_dict(side, target, rng):
    if target.startswith("input"):
        return copy_(side, target, rng)
    side.model.load_state_dict({target: torch.from_numpy(_new(target, side.tensor(target).shape, rng))}, strict=False)


def replace(side, target, rng):
    """Another tensor in the old one's place: a new Parameter or buffer, a new input tensor."""
    new = torch.from_numpy(_new(target, side.tensor(target).shape, rng))
    if target.startswith("input"):
        side.inputs[int(target.removeprefix("input"))] = new
        return
    owner, _, leaf = target.rpartition(".")
    module = side.model.get_submodule(owner)
    setattr(module, leaf, nn.Parameter(new) if leaf in module._parameters else new)


def sgd_step(side):
    """One training step in eager (both sides alike), then back to eval."""
    side.model.train()
    with torch.enable_grad():
        loss = side.model(*(x.clone() for x in side.inputs)).square().mean()
        loss.backward()
    torch.optim.SGD(side.model.parameters(), lr=0.05).step()
    side.model.zero_grad(set_to_none=True)
    side.model.eval()


WRITES = [data_mul, data_copy, numpy_element, numpy_whole, copy_, load_state_dict, replace]


def _close(out: torch.Tensor, ref: torch.Tensor, k: int, what: str, scale: float = 0.0) -> None:
    """Within 8*K*eps of the larger of max|ref| and `scale`, the size of the terms a result
    sums (which cancel to a small output after a training-mode batch norm, say)."""
    assert out.shape == ref.shape and out.dtype == ref.dtype, what
    bound = 8 * k * EPS32 * max(ref.abs().max().item(), scale, 1e-30) if ref.is_floating_point() else 0
    err = (out.double() - ref.double()).abs().max().item()
    assert err <= bound, f"{what}: max error {err:.3g} above {bound:.3g}"


def _agree(loom_side: Side, eager: Side, kind: str, when: str) -> None:
    """Both sides run once; outputs, buffers and inputs (which a model may change) agree."""
    with torchfx.recording() as ran:
        out = loom_side.call()
    sizes: list[float] = []  # |x| @ |W|^T of each Linear: the size of the terms its outputs sum

    def size(m, args):
        sizes.append((args[0].abs() @ m.weight.abs().t()).max().item())

    hooks = [m.register_forward_pre_hook(size) for m in eager.model.modules() if isinstance(m, nn.Linear)]
    try:
        ref = eager.call()
    finally:
        for hook in hooks:
            hook.remove()
    assert any(p.partitions for p in ran), f"{when}: no Loom kernel ran"  # (not a fallback to eager)
    _close(out, ref, K[kind], f"{when}: the output", max(sizes, default=0.0))
    for (name, b), r in zip(loom_side.model.named_buffers(), eager.model.buffers()):
        _close(b, r, K[kind], f"{when}: buffer {name}")
    for i, (x, r) in enumerate(zip(loom_side.inputs, eager.inputs)):
        _close(x, r, K[kind], f"{when}: input {i}")


STEPS = st.lists(st.tuples(st.sampled_from(["write", "sgd", "train"]), st.sampled_from(WRITES),
                           st.integers(0, 10_000), st.integers(0, 2**32 - 1)), min_size=1, max_size=5)


def _differential(kind: str, backend: str, inference: bool, steps) -> None:
    side = _compiled(kind, backend, inference)
    side.restart(inference)
    with torch.inference_mode(inference):
        model = copy.deepcopy(side.model)
        eager = Side(model, [x.clone() for x in side.inputs], model)
        targets = [n for n, t in [*side.model.named_parameters(), *side.model.named_buffers()] if t.is_floating_point()]
        targets += [f"input{i}" for i in range(len(side.inputs))]
        _agree(side, eager, kind, "before any change")
        for n, (step, write, pick, seed) in enumerate(steps):
            target = targets[pick % len(targets)]
            if step == "write" or (step == "sgd" and inference):  # (no autograd on inference tensors)
                for s in (side, eager):
                    write(s, target, np.random.default_rng(seed))
                when = f"step {n}: {write.__name__} of {target}"
            elif step == "sgd":
                for s in (side, eager):
                    sgd_step(s)
                when = f"step {n}: an SGD step"
            else:  # a pass in training mode under no_grad: batch norms update their statistics, once
                side.model.train()
                eager.model.train()
                try:
                    if backend == "compile":
                        _agree(side, eager, kind, f"step {n}: a pass in training mode")
                    else:  # a from_torch program is for inference (it says so): the pass runs in eager
                        with pytest.raises(ValueError, match="training mode"):
                            side.call()
                        for s in (side, eager):
                            Side(s.model, s.inputs, s.model).call()
                finally:
                    side.model.eval()
                    eager.model.eval()
                when = f"step {n}: after a pass in training mode"
            _agree(side, eager, kind, when)


@pytest.mark.parametrize("backend", ["compile", "from_torch"])
@pytest.mark.parametrize("kind", sorted(MODELS))
@given(steps=STEPS)
def test_backend_follows_eager(kind, backend, steps):
    _differential(kind, backend, False, steps)


@pytest.mark.parametrize("backend", ["compile", "from_torch"])
@pytest.mark.parametrize("kind", ["mlp", "convbn"])
@given(steps=STEPS)
def test_backend_follows_eager_on_inference_tensors(kind, backend, steps):
    """Parameters, buffers and inputs made under torch.inference_mode() (no version counter)."""
    _differential(kind, backend, True, steps)


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.bn, self.scale = nn.Linear(6, 5), nn.BatchNorm1d(5), 0.5

    def forward(self, x, shift):
        return self.bn(self.fc(x) * self.scale) + shift


@functools.cache
def _scaled():
    torch.manual_seed(4)
    model = Scaled().eval()
    model.bn.running_var.uniform_(0.5, 2)
    torch._dynamo.reset()
    return model, torch.compile(model, backend=loom.torch_backend)


@given(st.lists(st.tuples(st.floats(-4, 4, width=32), st.sampled_from([1e-5, 1e-3, 0.5]), st.floats(-4, 4, width=32)),
                min_size=1, max_size=4))
def test_float_arguments_and_attributes_follow_eager(values):
    """A scale attribute, a batch norm's eps and a float argument, changed between calls
    (dynamo compiles again once, then passes them as tensors read with .item())."""
    model, fast = _scaled()
    x = torch.from_numpy(np.random.default_rng(5).standard_normal((3, 6)).astype(np.float32))
    with torch.no_grad():
        for scale, eps, shift in values:
            model.scale, model.bn.eps = scale, eps
            _close(fast(x, shift), model(x, shift), 6 + 2, f"scale {scale}, eps {eps}, shift {shift}")


def test_a_from_torch_program_refuses_changed_attributes():
    """from_torch fixed the attributes it captured: a change is an error until it is undone."""
    torch.manual_seed(4)
    model = Scaled().eval()
    x = torch.randn(3, 6)
    program = loom.from_torch(model, (x, 0.25))
    with torch.no_grad():
        _close(program(x, 0.25), model(x, 0.25), 8, "as captured")
        for attribute, value in [("scale", 1.5), ("bn.eps", 0.5)]:
            owner, _, leaf = attribute.rpartition(".")
            module = model.get_submodule(owner)
            old = getattr(module, leaf)
            setattr(module, leaf, value)
            with pytest.raises(ValueError, match=f"attribute {attribute} is {value}, {old} when from_torch captured"):
                program(x, 0.25)
            setattr(module, leaf, old)
        with pytest.raises(ValueError, match="input #1 is 1.0, 0.25 in the example"):
            program(x, 1.0)
        _close(program(x, 0.25), model(x, 0.25), 8, "restored")

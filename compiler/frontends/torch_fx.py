"""Real models through Loom: a `torch.compile` backend and `from_torch`.

    import torch, compiler as loom
    fast = torch.compile(model.eval(), backend=loom.torch_backend)
    with torch.no_grad():
        y = fast(x)                          # conv/matmul/pools/relu/add/bn in Loom, the rest in torch

    program = loom.from_torch(model, (x,))   # the same, explicit: program(x), program.report()

The graph (dynamo's, or the model's for `from_torch`) is captured as ATen ops: `make_fx`
over the functionalized graph, on fake tensors (shapes and dtypes only: the capture runs
nothing, so an in-place update of an input or a buffer happens once per call, in torch,
where the functionalized graph copies it back; in-place ops become pure, views stay views).
torch's `CapabilityBasedPartitioner` groups the ops Loom supports into
the largest subgraphs it can without a cycle through torch; each group with a matmul or
conv2d becomes one `@compiler.jit` function (pipeline `default`: fusion included), traced
from the ATen nodes with the front end's operations; every other op stays in the graph,
run by torch (pooling joins a group: max_pool2d whose indices no one reads, avg_pool2d
and mean, the last two on floats). Inside a group with a conv2d the 4-D tensors are NHWC (Loom's faster conv
layout): an input is passed as a permuted view (no copy; a channels_last tensor is then
contiguous), a 4-D result comes back as an NHWC array viewed as NCHW (torch continues on
a channels_last tensor). The model's parameters and buffers (only they: an activation or
any other input is read at each call) are folded at the first call: filters permuted to
HWCF, an inference batch norm after a conv2d folded into its filter and bias, a weight a
matmul reads transposed stored so; the tensors they come from are checked at each call
(every bit, against a copy kept of them: a write through `.data` or a numpy view changes
no version counter) and folded again if they changed, unless `freeze=True` says they never
change.

A bfloat16 model (`model.to(torch.bfloat16)`, or an autocast region) runs its matmuls and
convolutions on bfloat16 operands with float32 sums; the ops after them compute in float32
and the results are rounded to bfloat16 where torch stores them (at the partition's end,
and where a value that another matmul or conv2d reads is made: its other readers see it
rounded too, as in torch); autocast's casts of the parameters fold with them.

What stays in torch, and why, is in the report (`program.report()`, `compiler.explain`):
an op Loom has no operation for, a dtype other than float32/float64/bfloat16 (a cast
other than between float32 and bfloat16), a batch norm in
training mode, a transposed convolution, a group with no matmul or conv2d (the
elementwise ops alone are as fast in torch), or a group Loom failed to compile (its error).
A Python float that changes between calls (dynamo passes it as a tensor read with `.item()`)
is read at each call, the ops that use it run in torch. A graph that needs autograd (grad
enabled and an input requiring grad), has dynamic shapes, tensors off the CPU, or that make_fx
cannot capture (a float that a decision depends on, such as a batch norm's eps that changed) is
left to torch whole, with the reason. A `from_torch` program is fixed to its example's shapes
and dtypes and to the model's attributes: called otherwise, it says so. This module imports
torch: nothing else in Loom imports it.
"""

from __future__ import annotations

import functools
import inspect
import math
import operator
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
import torch
from torch._dynamo.source import is_from_unspecialized_param_buffer_source
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from compiler.frontends import python as F
from compiler.numpy_reference import pack_filter, winograd_filter
from dialects.dtypes import FILTER_GROUPS
from passes.analysis.cost_model import choose_winograd, filter_panel
from passes.support.algorithms import check_algorithms
from passes.support.diagnostics import LoomError
from passes.support.target import host
from compiler.driver import compile_in_parallel

aten = torch.ops.aten

CONV = aten.convolution.default
BATCH_NORM = {aten.native_batch_norm.default, aten._native_batch_norm_legit_no_training.default}
COMPUTE = {CONV, aten.mm.default, aten.addmm.default, aten.bmm.default, aten.linear.default}
#: hardtanh(x, min_val, max_val) (ReLU6's) and clamp(x, min, max): loom.clamp, bounds that are numbers
CLAMPS = {aten.hardtanh.default: ("min_val", "max_val", -1.0, 1.0), aten.clamp.default: ("min", "max", None, None)}
ELEMENTWISE = {aten.relu.default, aten.add.Tensor, aten.mul.Tensor, aten.sub.Tensor, *CLAMPS}
VIEWS = {aten.t.default, aten.permute.default, aten.transpose.int, aten.view.default, aten._unsafe_view.default,
         aten.reshape.default, aten.expand.default, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims,
         aten.flatten.using_ints, aten.clone.default, aten.alias.default, aten.detach.default}
MATMULS = {aten.mm.default, aten.addmm.default, aten.bmm.default}
RESHAPES = {aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.unsqueeze.default,
            aten.squeeze.dim, aten.squeeze.dims, aten.flatten.using_ints}
CAST = aten._to_copy.default
MAX_POOL = aten.max_pool2d_with_indices.default
AVG_POOL = aten.avg_pool2d.default
MEAN = aten.mean.dim
POOLS = {MAX_POOL, AVG_POOL, MEAN}
#: torch's dimension of an NCHW tensor -> its place in the NHWC array Loom holds
_NHWC_DIM = {0: 0, 1: 3, 2: 1, 3: 2}
_DTYPES = (torch.float32, torch.float64, torch.bfloat16)
_FLOAT32 = {torch.float32, torch.bfloat16}  # Loom computes both in float32 (bfloat16 products summed in it)
_NUMPY = {torch.float32: np.dtype(np.float32), torch.float64: np.dtype(np.float64),
          torch.bfloat16: np.dtype(ml_dtypes.bfloat16)}


def _name(target) -> str:
    return getattr(target, "__name__", str(target)) if not isinstance(target, torch._ops.OpOverload) \
        else f"aten.{target.__name__.replace('.default', '')}"


def _eps(bn: torch.fx.Node) -> float:
    return float(bn.args[7] if bn.target is aten.native_batch_norm.default else bn.args[6])


def _perm(n: torch.fx.Node) -> tuple[int, ...]:
    """The permutation of a t, permute or transpose node."""
    rank = _val(n.args[0]).dim()
    if n.target is aten.permute.default:
        return tuple(d % rank for d in n.args[1])
    perm = list(range(rank))
    if rank < 2:  # t of a vector: itself
        return tuple(perm)
    d0, d1 = (n.args[1] % rank, n.args[2] % rank) if n.target is aten.transpose.int else (0, 1)
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return tuple(perm)


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _tensor(node) -> torch.Tensor:
    """A node's tensor (of a batch norm's results, the first)."""
    val = _val(node)
    return val[0] if isinstance(val, tuple | list) else val


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def layer_name(n: torch.fx.Node) -> str:
    """The model's name for the module an ATen node came from (`layer1.0.conv1`, from the
    node's `nn_module_stack`, which the capture keeps), else the node's own name."""
    stack = n.meta.get("nn_module_stack")
    if stack:
        path = re.sub(r"^L\['\w+'\]\.?", "", list(stack.values())[-1][0])  # (dynamo's name of the root: self, fn)
        if path:
            return path
    return n.name


def node_flops(n: torch.fx.Node) -> int:
    """The multiply-adds x 2 of a conv2d or matmul node (what the FMA peak is about); 0 for
    any other op."""
    if n.target not in COMPUTE:
        return 0
    out = _tensor(n)
    if n.target is CONV:
        w = _tensor(n.args[1])
        return 2 * out.numel() * w[0].numel()  # (C / groups) x kh x kw per output
    a = n.args[1] if n.target is aten.addmm.default else n.args[0]  # (addmm's first is the bias)
    return 2 * out.numel() * _tensor(a).shape[-1]  # K


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    """A numpy view of a tensor (no copy); bfloat16 as ml_dtypes.bfloat16, which numpy lacks."""
    t = t.detach()
    if t.dtype is torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _to_torch(a: np.ndarray) -> torch.Tensor:
    """A tensor viewing a numpy array (no copy); ml_dtypes.bfloat16 as torch.bfloat16."""
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _arg(n: torch.fx.Node, index: int, name: str, default):
    """An ATen node's argument by position or keyword, else its default."""
    return n.args[index] if len(n.args) > index else n.kwargs.get(name, default)


def _clamp_bounds(node: torch.fx.Node) -> tuple[object, object]:
    """(min, max) of a hardtanh or clamp node (`CLAMPS`: its defaults where not given)."""
    low, high, low_default, high_default = CLAMPS[node.target]
    return _arg(node, 1, low, low_default), _arg(node, 2, high, high_default)


def _pool_pair(a) -> tuple[int, int] | None:
    """A pool's kernel_size, stride or padding as a pair (torch's one value for both), None
    where torch leaves it out (an empty stride: the window's)."""
    if a is None or isinstance(a, list | tuple) and not a:
        return None
    a = list(a) if isinstance(a, list | tuple) else [a]
    return int(a[0]), int(a[-1])


def _wide(traced):
    """A traced bfloat16 array as float32, which Loom's elementwise ops compute in (as torch
    does inside its bfloat16 kernels); any other array itself."""
    return traced.astype(np.float32) if traced.dtype == ml_dtypes.bfloat16 else traced


def _stored(n: torch.fx.Node, v: _Value) -> _Value:
    """A bfloat16 value computed in float32 that a matmul or conv2d reads, rounded to
    bfloat16 where it is made, as torch stores it: its other readers (a residual add)
    then see the rounded value too, widened again (loom-fuse-epilogue widens it in the
    stores of the conv whose epilogue adds it), and the rounding fuses into the epilogue
    that makes it. Rounded only where the conv read it, a residual block's output stayed
    float32 for the residual add, and its rounding was a nest of its own (bf16 ResNet-18,
    batch 8, one thread, profiled: 144.7 -> 137.2 ms, with the stem on 4 channels, 14.4 ->
    12.7 ms of it; layer1's second convs 9.5 -> 8.4 ms each)."""
    val = _val(n)
    if (isinstance(val, torch.Tensor) and val.dtype is torch.bfloat16 and getattr(v.traced, "dtype", None) == np.float32
            and any(u.target in COMPUTE for u in n.users)):
        return _Value(v.traced.astype(ml_dtypes.bfloat16), nhwc=v.nhwc, shape=v.shape)
    return v


def _computed_in(dtype: torch.dtype) -> torch.dtype:
    """The dtype Loom computes a torch dtype's elementwise ops in (bfloat16: float32)."""
    return torch.float32 if dtype is torch.bfloat16 else dtype


def _cast_source(n):
    """The value a chain of dtype casts starts from (n itself when it is no cast)."""
    while isinstance(n, torch.fx.Node) and n.target is CAST:
        n = n.args[0]
    return n


def _readers(n: torch.fx.Node) -> list[torch.fx.Node]:
    """The nodes that read n, through dtype casts (a cast is not a reader: its readers are)."""
    return [r for u in n.users for r in (_readers(u) if u.target is CAST else [u])]


# --------------------------------------------------------------------------------------
# What Loom supports, node by node (with the reason for what it does not)
# --------------------------------------------------------------------------------------


class LoomSupport(OperatorSupportBase):
    """The partitioner's question, node by node; `reasons` keeps why a node stays in torch."""

    def __init__(self):
        super().__init__()
        self.reasons: dict[torch.fx.Node, str] = {}

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        if node.op != "call_function":
            return False
        reason = self._refusal(node)
        if reason is not None:
            self.reasons[node] = reason
        return reason is None

    def _refusal(self, node: torch.fx.Node) -> str | None:
        target = node.target
        if target is operator.getitem:
            source = node.args[0]
            if isinstance(source, torch.fx.Node) and source.target in BATCH_NORM | {MAX_POOL} and node.args[1] == 0:
                return self._refusal(source)
            return "an item of a result torch computes"
        if target not in COMPUTE | ELEMENTWISE | VIEWS | BATCH_NORM | POOLS | {CAST}:
            return f"Loom has no operation for {_name(target)}"
        val = _tensor(node)
        if not isinstance(val, torch.Tensor):
            return "its result is not a tensor"
        if target is CAST and isinstance(_val(node.args[0]), torch.Tensor):
            if set(node.kwargs) - {"dtype"} or len(node.args) != 1:
                return "a copy that changes more than the dtype (device, layout or memory format)"
            if not {_val(node.args[0]).dtype, val.dtype} <= _FLOAT32:
                return (f"a conversion from {_dtype_name(_val(node.args[0]).dtype)} to {_dtype_name(val.dtype)} "
                        "(Loom converts between float32 and bfloat16)")
        if val.dtype not in _DTYPES:
            return f"dtype {_dtype_name(val.dtype)} (Loom computes in float32, float64 and bfloat16)"
        if val.device.type != "cpu":
            return f"a tensor on {val.device} (Loom runs on the CPU)"
        if val.dim() == 0:
            return "a 0-d tensor"
        for a in node.args:
            for t in (a if isinstance(a, list | tuple) else [a]):
                v = _val(t)
                if isinstance(t, torch.fx.Node) and not isinstance(v, torch.Tensor):
                    return "an operand that is a number computed at run time (a Python float that changes)"
                if isinstance(v, torch.Tensor) and v.dim() == 0:
                    return "a 0-d tensor operand"
                if isinstance(v, torch.Tensor) and v.dtype != val.dtype and not {v.dtype, val.dtype} <= _FLOAT32:
                    return (f"an operand of dtype {_dtype_name(v.dtype)} for a {_dtype_name(val.dtype)} result "
                            "(a mixed-dtype op; Loom mixes float32 and bfloat16 alone)")

        if target is CONV:
            x, w, _, stride, padding, dilation, transposed, _, groups = node.args
            if transposed:
                return "a transposed convolution"
            if _val(w).dim() != 4:
                return f"a {_val(w).dim() - 2}-D convolution (Loom's conv2d is 2-D)"
        if target is MAX_POOL:
            dilation, ceil = _arg(node, 4, "dilation", 1), _arg(node, 5, "ceil_mode", False)
            if ceil:
                return "a max pool with ceil_mode=True (Loom's windows end inside the padded input)"
            if any(d != 1 for d in (dilation if isinstance(dilation, list | tuple) else [dilation])):
                return "a dilated max pool"
            if any(u.target is not operator.getitem or u.args[1] != 0 for u in node.users):
                return "a max pool whose indices are used (Loom computes the values alone)"
            if _val(node.args[0]).dim() != 4:
                return "a max pool of a tensor that is not 4-D (Loom's max_pool2d is NCHW)"
        if target is AVG_POOL:
            ceil, divisor = _arg(node, 4, "ceil_mode", False), _arg(node, 6, "divisor_override", None)
            if ceil:
                return "an average pool with ceil_mode=True (Loom's windows end inside the padded input)"
            if divisor is not None:
                return "an average pool with divisor_override"
            if _val(node.args[0]).dim() != 4:
                return "an average pool of a tensor that is not 4-D (Loom's avg_pool2d is NCHW)"
        if target is MEAN:
            if _arg(node, 3, "dtype", None) is not None:
                return "a mean that converts its dtype"
            dims = _arg(node, 1, "dim", None)
            if not isinstance(dims, list | tuple) or not dims:
                return "a mean over every dimension"
        if target in BATCH_NORM:
            if target is aten.native_batch_norm.default and node.args[5]:
                return "a batch norm in training mode (call model.eval())"
            if any(p is not None and p.op != "placeholder" for p in node.args[1:5]):
                return "a batch norm whose parameters are computed in the graph"
            if _val(node.args[0]).dim() < 2:
                return "a batch norm of a 1-D tensor"
        if target in CLAMPS:
            bounds = _clamp_bounds(node)
            if any(b is None for b in bounds):
                return "a clamp with one bound alone (Loom's clamp takes both)"
            if not all(isinstance(b, int | float) and not isinstance(b, bool) and math.isfinite(b) for b in bounds):
                return "a clamp whose bounds are not finite numbers"
            if bounds[0] > bounds[1]:
                return f"a clamp whose min ({bounds[0]}) is larger than its max ({bounds[1]})"
        if target in (aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor):
            if not any(isinstance(a, torch.fx.Node) for a in node.args[:2]):
                return "an op on numbers alone"
            if any(not isinstance(a, torch.fx.Node | int | float) or isinstance(a, bool) for a in node.args[:2]):
                return "an operand that is neither a tensor nor a number"
        if target is aten.linear.default and _val(node.args[0]).dim() > 3:
            return "a linear layer on a tensor of more than 3 dimensions"
        return None


# --------------------------------------------------------------------------------------
# One partition: an ATen subgraph traced into a @compiler.jit function
# --------------------------------------------------------------------------------------


@dataclass
class _Value:
    """A value of the trace: a Traced array, NHWC (dims n, h, w, c of a 4-D tensor) or as torch has it;
    `shape`, when set, is a reshape not applied yet: torch's shape of the value, `traced` has another
    (elementwise ops apply before it, so that a matmul's epilogue stays next to it and fuses)."""

    traced: Any
    nhwc: bool = False
    shape: tuple[int, ...] | None = None

    def applied(self):
        """The traced array in torch's dimension order and shape."""
        if self.nhwc:
            return F.transpose(self.traced, (0, 3, 1, 2))
        return F.reshape(self.traced, self.shape) if self.shape is not None else self.traced


@dataclass
class _Constant:
    """Arrays computed from the partition's input tensors before the kernel runs and passed
    to it in their place: a conv2d's filter permuted to HWCF with the batch norm after it
    folded in, a batch norm's scale and shift, a transposed weight made contiguous."""

    node: torch.fx.Node  # the node the arrays stand in for
    sources: tuple[int | None, ...]  # the placeholders they are computed from (None: absent)
    make: Callable[..., tuple[np.ndarray, ...]]  # the source tensors -> the arrays
    fixed: bool = True  # made of parameters and buffers alone: kept between calls (else made at each call)

    def arguments(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor | None]:
        """The tensors `make` takes, of the partition's."""
        return [None if i is None else tensors[i] for i in self.sources]


def _bits(t: torch.Tensor) -> np.ndarray:
    """A tensor's bits: a numpy view of it as integers of its width (no copy), which compares
    equal only to the very same bits (NaN and -0.0 included)."""
    a = _to_numpy(t)
    return a.view(f"i{a.itemsize}")


def _fold_conv(w, conv_bias, bn_weight, bn_bias, mean, var, *, eps, dtype, bias_dtype, winograd_tile=0, panel=0,
               group=0):
    """The HWCF filter (of dtype) and its bias (of bias_dtype, if any) with the batch norm
    (if any) folded in, computed in float64; with `winograd_tile` m, the filter transformed
    for Winograd's F(m x m, 3 x 3) as well (alpha^2 x C x F), in float64 before rounding;
    with `panel`, in panels of that many output channels (`pack_filter`), of groups of
    `group` channels if given."""
    with torch.no_grad():
        w64 = w.detach().double()
        bias = conv_bias.detach().double() if conv_bias is not None else None
        if mean is not None:
            scale = (var.detach().double() + eps).rsqrt()
            if bn_weight is not None:
                scale = scale * bn_weight.detach().double()
            w64 = w64 * scale[:, None, None, None]
            bias = ((bias if bias is not None else 0) - mean.detach().double()) * scale
            if bn_bias is not None:
                bias = bias + bn_bias.detach().double()
        w64 = w64.permute(2, 3, 1, 0)
        if winograd_tile:
            w64 = torch.from_numpy(winograd_filter(_to_numpy(w64), winograd_tile))
        hwcf = np.ascontiguousarray(_to_numpy(w64.to(dtype)))
        if panel:
            hwcf = pack_filter(hwcf, panel, group)
        return (hwcf,) if bias is None else (hwcf, np.ascontiguousarray(_to_numpy(bias.to(bias_dtype))))


def _filter_panel(conv: torch.fx.Node) -> tuple[int, int]:
    """The panel width and group a folded filter is packed in (`cost_model.filter_panel`),
    or (0, 0) for HWCF: float32 and float64 convs, whose direct convolution's M is
    N*Ho*Wo; bfloat16 ones in pairs of channels on a host with AVX512-BF16, where the
    direct convolution reads their windows in groups (no dilation, C even)."""
    y, w = _val(conv), _val(conv.args[1])
    n, f, ho, wo = y.shape
    _, c, r, s = w.shape
    if conv.args[8] != 1:  # a grouped convolution's filter stays in its plain layout
        return 0, 0
    dot, group = "", 0
    if y.dtype == torch.bfloat16:
        dot, group = "vdpbf16ps", FILTER_GROUPS["bf16"]
        if not host().bf16_dot or c % group or any(d != 1 for d in conv.args[5]):
            return 0, 0
    elif y.dtype not in (torch.float32, torch.float64):
        return 0, 0
    nr = filter_panel(n * ho * wo, f, c * r * s, host(), y.element_size(), dot)
    return (nr, group) if nr else (0, 0)


def _affine(bn_weight, bn_bias, mean, var, *, eps, dtype):
    """A batch norm's scale and shift, one per channel."""
    with torch.no_grad():
        scale = (var.detach().double() + eps).rsqrt()
        if bn_weight is not None:
            scale = scale * bn_weight.detach().double()
        shift = -mean.detach().double() * scale
        if bn_bias is not None:
            shift = shift + bn_bias.detach().double()
        return np.ascontiguousarray(scale.to(dtype).numpy()), np.ascontiguousarray(shift.to(dtype).numpy())


def _permuted(w, *, perm, dtype):
    """A weight read through a transpose by a matmul, copied in that order (contiguous), in
    the dtype the matmul reads it in."""
    return (np.ascontiguousarray(_to_numpy(w.detach().permute(perm).to(dtype))),)


class LoomPartition(torch.nn.Module):
    """A fused group of ATen nodes run by one Loom kernel, in place of the submodule the
    partitioner made of them (kept as `fallback`, run by torch if Loom cannot compile it)."""

    def __init__(self, name: str, sub: torch.fx.GraphModule, *, fixed: frozenset[int], freeze: bool, pipeline: str,
                 num_threads: int | None, cache: bool, algorithms: str = "exact"):
        super().__init__()
        self.name = name
        self.algorithms = algorithms
        #: the convs run by Winograd with their filters transformed when folded: node -> m
        self.winograd_tiles: dict[torch.fx.Node, int] = {}
        #: the convs whose folded filters are packed in panels (`pack_filter`): node -> NR
        self.filter_panels: dict[torch.fx.Node, int] = {}
        self.fallback = sub
        self.fixed = fixed  # the placeholders that are the model's parameters and buffers: folded
        self.freeze = freeze  # trust them never to change: folded at the first call, never checked
        self.graph_nodes = [n for n in sub.graph.nodes if n.op == "call_function"]
        self.placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
        out = next(n for n in sub.graph.nodes if n.op == "output").args[0]
        self.results = list(out) if isinstance(out, tuple | list) else [out]
        self.single = not isinstance(out, tuple | list)
        self.has_conv = any(n.target is CONV for n in self.graph_nodes)
        self.nhwc_inputs = {i for i, p in enumerate(self.placeholders)
                            if self.has_conv and isinstance(_val(p), torch.Tensor) and _val(p).dim() == 4}
        self.constants, folded, self.folded_casts = self._plan()
        # placeholders read only to compute constants (filters, batch norm parameters): not passed to the kernel
        self.passed = [i for i, p in enumerate(self.placeholders) if any((u, p) not in folded for u in p.users)]

        def body(*arrays):
            return self._body(*arrays)

        body.__name__ = body.__qualname__ = name  # the kernel's name
        self._body_fn = body
        self._options = dict(pipeline=pipeline, num_threads=num_threads, cache=cache, algorithms=algorithms)
        self.jit: F.JitFunction | None = None  # made by build(), when the constants are known
        self.error: str | None = None
        self._example: list[np.ndarray] = []  # the kernel's arrays for the example inputs (prepare())
        # per constant: its arrays, and the bits of the tensors they were folded from (empty under freeze)
        self._constant_arrays: dict[torch.fx.Node, tuple[np.ndarray, ...]] = {c.node: () for c in self.constants}
        self._folded_from: dict[torch.fx.Node, list[np.ndarray]] = {}
        self.last_arrays: list[np.ndarray] | None = None
        self._profiled: F.JitFunction | None = None

    # ---- planning ---------------------------------------------------------------------

    def _plan(self) -> tuple[list[_Constant], set, set]:
        """The constants (see _Constant), the (reader, value) pairs they consume, and the
        dtype casts they consume whole (autocast's casts of the parameters): each conv2d whose
        filter and bias are parameters (with the batch norm after it when that is its only
        reader and its tensors are buffers and parameters), every other batch norm (made at
        each call when its tensors are not all parameters and buffers), and each transpose of
        a parameter that only matmuls read. A filter or a transpose of any other tensor is read
        in the kernel, at each call. A parameter cast to another dtype counts as the parameter:
        its constant is made in the dtype its reader reads."""
        index = {p: i for i, p in enumerate(self.placeholders)}
        pos = lambda n: index.get(_cast_source(n)) if isinstance(n, torch.fx.Node) else None  # noqa: E731
        fixed = lambda n: n is None or pos(n) in self.fixed  # (absent, or a parameter or buffer)
        constants, uses = [], set()

        def folds(conv) -> bool:  # a conv2d whose filter and bias are parameters
            return conv.target is CONV and pos(conv.args[1]) is not None and all(map(fixed, conv.args[1:3]))

        bn_of_conv = {n.args[0]: n for n in self.graph_nodes if n.target in BATCH_NORM
                      and folds(n.args[0]) and len(n.args[0].users) == 1 and all(map(fixed, n.args[1:5]))}
        for n in self.graph_nodes:
            if folds(n):
                w, b = n.args[1], n.args[2]
                bn = bn_of_conv.get(n)
                params = bn.args[1:5] if bn is not None else (None,) * 4
                eps = _eps(bn) if bn is not None else 0.0
                dtype = _val(n).dtype
                tile = self._winograd_tile(n)
                if tile:
                    self.winograd_tiles[n] = tile
                panel, group = (0, 0) if tile else _filter_panel(n)
                if panel:
                    self.filter_panels[n] = panel
                constants.append(_Constant(n, (pos(w), pos(b), *map(pos, params)),
                                           functools.partial(_fold_conv, eps=eps, dtype=dtype,
                                                             bias_dtype=_computed_in(dtype), winograd_tile=tile,
                                                             panel=panel, group=group)))
                uses |= {(n, w), (n, b)} | ({(bn, p) for p in params} if bn is not None else set())
                if bn is not None:
                    constants.append(_Constant(bn, (), lambda: ()))  # applied by the conv's constants
            elif n.target in BATCH_NORM and n.args[0] not in bn_of_conv:
                constants.append(_Constant(n, tuple(map(pos, n.args[1:5])),
                                           functools.partial(_affine, eps=_eps(n), dtype=_computed_in(_tensor(n).dtype)),
                                           fixed=all(map(fixed, n.args[1:5]))))
                uses |= {(n, p) for p in n.args[1:5]}
            elif (n.target in (aten.t.default, aten.permute.default, aten.transpose.int) and pos(n.args[0]) is not None
                  and fixed(n.args[0]) and all(u.target in MATMULS for u in _readers(n))
                  and len(read := {_val(u).dtype for u in n.users}) == 1):
                constants.append(_Constant(n, (pos(n.args[0]),),
                                           functools.partial(_permuted, perm=_perm(n), dtype=read.pop())))
                uses.add((n, n.args[0]))
        # a cast all of whose readers consume it consumes its operand (the cast is not traced)
        casts = set()
        while more := [n for n in self.graph_nodes if n.target is CAST and n not in casts and n.users
                       and all((u, n) in uses for u in n.users)]:
            casts |= set(more)
            uses |= {(n, n.args[0]) for n in more}
        return constants, uses, casts

    def _winograd_tile(self, conv: torch.fx.Node) -> int:
        """With algorithms="fast", Winograd's tile m for a conv whose filter is folded (its
        transform then folded too: `choose_winograd(filter_given=True)`), or 0: the direct
        convolution (not 3x3 stride 1 undilated, not float32/float64, or estimated slower).
        Other convs are left to loom-winograd in the kernel."""
        if self.algorithms != "fast":
            return 0
        stride, _, dilation = conv.args[3:6]
        y, w = _val(conv), _val(conv.args[1])
        if (tuple(w.shape[2:]) != (3, 3) or tuple(stride) != (1, 1) or tuple(dilation) != (1, 1)
                or y.dtype not in (torch.float32, torch.float64) or conv.args[8] != 1):
            return 0
        n, f, ho, wo = y.shape
        return choose_winograd(n, ho, wo, w.shape[1], f, host(), filter_given=True).tile

    def _fold(self, tensors: Sequence[torch.Tensor]) -> None:
        """Each constant, computed again unless it is made of parameters and buffers whose
        every bit is what it was when it was made (compared with a copy kept of them: a write
        through `.data` or a numpy view changes neither storage nor version counter); under
        freeze, made at the first call only."""
        for c in self.constants:
            arguments = c.arguments(tensors)
            sources = [t for t in arguments if t is not None]
            known = self._folded_from.get(c.node)
            if known is not None and (self.freeze or all(np.array_equal(k, _bits(t)) for k, t in zip(known, sources))):
                continue
            self._constant_arrays[c.node] = c.make(*arguments)
            if c.fixed:
                self._folded_from[c.node] = [] if self.freeze else [_bits(t).copy() for t in sources]

    # ---- the trace --------------------------------------------------------------------

    def _body(self, *arrays):
        """The partition as front-end operations on the traced arrays (run by @compiler.jit)."""
        env: dict[torch.fx.Node, _Value] = {}
        for i, a in zip(self.passed, arrays):
            env[self.placeholders[i]] = _Value(a, nhwc=i in self.nhwc_inputs)
        constants = iter(arrays[len(self.passed):])
        folded = {node: tuple(next(constants) for _ in made) for node, made in self._constant_arrays.items()}
        for n in self.graph_nodes:
            if n not in self.folded_casts:
                with F.located(f"{layer_name(n)}:1:1"):  # (the profile's and the errors' name for its ops)
                    env[n] = _stored(n, self._op(n, env, folded))
        values = [env[r] for r in self.results]
        self.result_shapes = [v.shape for v in values]  # the reshapes left to torch (views there)
        self.result_nhwc = [v.nhwc for v in values]  # NHWC arrays, seen by torch as channels_last NCHW
        # in torch's dtype: a bfloat16 value was computed in float32 (rounded once, here)
        outs = [v.traced.astype(_NUMPY[_tensor(r).dtype]) for v, r in zip(values, self.results)]
        return outs[0] if self.single else tuple(outs)

    def _op(self, n: torch.fx.Node, env, folded) -> _Value:
        t = n.target

        def logical(x) -> Any:
            """The value in torch's dimension order and shape (a number stays a number)."""
            return env[x].applied() if isinstance(x, torch.fx.Node) else x

        def read(x, traced=None) -> Any:
            """An operand of a matmul or conv2d in torch's dtype of it (a bfloat16 value
            computed in float32 is rounded here, as torch stores it)."""
            return (logical(x) if traced is None else traced).astype(_NUMPY[_val(x).dtype])

        if t is operator.getitem:
            return env[n.args[0]]
        if t is CAST:
            v = env[n.args[0]]
            return _Value(v.traced.astype(_NUMPY[_val(n).dtype]), nhwc=v.nhwc, shape=v.shape)
        if t in (aten.t.default, aten.permute.default, aten.transpose.int) and n in folded:
            return _Value(folded[n][0])  # a weight transposed at compile time
        if t is CONV:
            x, w, b, stride, padding, dilation, _, _, groups = n.args
            xv = env[x]
            xt = read(x, xv.traced if xv.nhwc else F.transpose(xv.applied(), (0, 2, 3, 1)))
            if n in folded:
                hwcf, *bias = folded[n]
                bias = bias[0] if bias else None
            else:  # a filter computed in the graph: permuted (a copy) in the kernel
                hwcf = F.contiguous(F.transpose(read(w), (2, 3, 1, 0)))
                bias = _wide(logical(b)) if b is not None else None
            if n in self.winograd_tiles:  # hwcf is the transformed filter
                y = F.winograd_conv2d(xt, hwcf, tile=self.winograd_tiles[n], padding=tuple(padding))
            else:
                y = F.conv2d(xt, hwcf, stride=tuple(stride), padding=tuple(padding), dilation=tuple(dilation),
                             layout="nhwc", groups=groups)
            if bias is not None:
                y = y + bias
            return _Value(y, nhwc=True)
        if t in BATCH_NORM:
            x = env[n.args[0]]
            if not folded[n]:
                return x  # folded into the conv before it
            scale, shift = folded[n]  # x * scale + shift, per channel: dimension 1 (the last in NHWC)
            if x.nhwc:
                return _Value(_wide(x.traced) * scale + shift, nhwc=True)
            xt = _wide(x.applied())
            rank = len(xt.shape)
            if rank > 2:
                scale, shift = (F.reshape(c, (c.shape[0],) + (1,) * (rank - 2)) for c in (scale, shift))
            return _Value(xt * scale + shift)
        if t is aten.relu.default:
            v = env[n.args[0]]
            return _Value(F.relu(_wide(v.traced)), nhwc=v.nhwc, shape=v.shape)
        if t in CLAMPS:
            v = env[n.args[0]]
            return _Value(F.clamp(_wide(v.traced), *_clamp_bounds(n)), nhwc=v.nhwc, shape=v.shape)
        if t in (MAX_POOL, AVG_POOL):
            v = env[n.args[0]]
            window, stride, padding = (_pool_pair(_arg(n, i, name, None))
                                       for i, name in ((1, "kernel_size"), (2, "stride"), (3, "padding")))
            x = _wide(v.traced if v.nhwc else v.applied())
            options = dict(stride=stride, padding=padding or 0, layout="nhwc" if v.nhwc else "nchw")  # (stride: the window)
            if t is MAX_POOL:
                return _Value(F.max_pool2d(x, window, **options), nhwc=v.nhwc)
            counts = _arg(n, 5, "count_include_pad", True)
            return _Value(F.avg_pool2d(x, window, count_include_pad=bool(counts), **options), nhwc=v.nhwc)
        if t is MEAN:
            v = env[n.args[0]]
            keep = bool(_arg(n, 2, "keepdim", False))
            rank = _val(n.args[0]).dim()
            axes = tuple(sorted(int(d) % rank for d in _arg(n, 1, "dim", None)))
            if not v.nhwc:
                return _Value(F.mean(_wide(v.applied()), axes, keepdims=keep))
            m = F.mean(_wide(v.traced), tuple(_NHWC_DIM[d] for d in axes), keepdims=True)
            if keep:
                return _Value(m, nhwc=True)
            return _Value(F.reshape(F.transpose(m, (0, 3, 1, 2)), tuple(_val(n).shape)))
        if t in (aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor):
            a, b = n.args[:2]
            alpha = n.kwargs.get("alpha", n.args[2] if len(n.args) > 2 else 1)
            nhwc = any(isinstance(o, torch.fx.Node) and env[o].nhwc for o in (a, b))
            shape = None if nhwc else self._pending(a, b, env)
            ta, tb = (self._operand(o, env, nhwc, shape) for o in (a, b))
            if t is aten.mul.Tensor:
                return _Value(ta * tb, nhwc, shape)
            if alpha != 1:
                tb = tb * alpha
            return _Value(ta + tb if t is aten.add.Tensor else ta - tb, nhwc, shape)
        if t is aten.mm.default or t is aten.bmm.default:
            return _Value(F.matmul(read(n.args[0]), read(n.args[1])))
        if t is aten.addmm.default:
            bias, a, b = n.args[:3]
            beta, alpha = n.kwargs.get("beta", 1), n.kwargs.get("alpha", 1)
            p = F.matmul(read(a), read(b))
            p = p * alpha if alpha != 1 else p
            bt = _wide(logical(bias))
            return _Value(p + (bt * beta if beta != 1 else bt))
        if t is aten.linear.default:
            y = F.matmul(read(n.args[0]), F.transpose(read(n.args[1])))
            b = n.args[2] if len(n.args) > 2 else None
            return _Value(y + _wide(logical(b)) if b is not None else y)
        if t in RESHAPES and not env[n.args[0]].nhwc:  # left pending (see _Value)
            v, shape = env[n.args[0]], tuple(_val(n).shape)
            return _Value(v.traced, shape=None if shape == v.traced.shape else shape)
        return _Value(self._view(n, logical(n.args[0])))

    @staticmethod
    def _pending(a, b, env) -> tuple[int, ...] | None:
        """The pending reshape an elementwise op of a and b can keep (applied to their
        unreshaped arrays): where one is pending and the other is a number, a vector along
        the last dimension (which the reshape keeps), or pending from the same shape."""
        values = [env[o] if isinstance(o, torch.fx.Node) else None for o in (a, b)]
        pending = [v for v in values if v is not None and v.shape is not None]
        if not pending:
            return None
        shape, base = pending[0].shape, pending[0].traced.shape
        for o, v in zip((a, b), values):
            if v is None or v is pending[0]:
                continue
            if v.shape is not None:
                if v.shape != shape or v.traced.shape != base:
                    return None
                continue
            vshape = tuple(_val(o).shape)
            if len(vshape) > len(shape) or any(d != 1 for d in vshape[:-1]) or vshape[-1] != base[-1] \
                    or shape[-1] != base[-1]:
                return None
        return shape

    def _operand(self, o, env, nhwc: bool, pending: tuple[int, ...] | None):
        """An elementwise operand in the layout of the op: NHWC if either operand is (a
        lower-rank operand broadcast against the 4-D one is made 4-D, then permuted); on
        the unreshaped arrays if the op keeps a pending reshape (a vector made 1-D)."""
        if not isinstance(o, torch.fx.Node):
            return float(o)
        return _wide(self._laid_out(o, env, nhwc, pending))

    @staticmethod
    def _laid_out(o: torch.fx.Node, env, nhwc: bool, pending: tuple[int, ...] | None):
        v = env[o]
        if pending is not None:
            if v.shape is not None:
                return v.traced
            return F.reshape(v.traced, (v.traced.shape[-1],)) if len(v.traced.shape) != 1 else v.traced
        if not nhwc:
            return v.applied()
        if v.nhwc:
            return v.traced
        shape = tuple(_val(o).shape)
        t = v.applied()
        t = F.reshape(t, (1,) * (4 - len(shape)) + shape) if len(shape) < 4 else t
        return F.transpose(t, (0, 2, 3, 1))

    @staticmethod
    def _view(n: torch.fx.Node, x):
        t = n.target
        shape = tuple(_val(n).shape)
        if t in (aten.t.default, aten.permute.default, aten.transpose.int):
            return F.transpose(x, _perm(n))
        if t is aten.expand.default:
            return F.broadcast_to(x, shape)
        if t in (aten.clone.default, aten.alias.default, aten.detach.default):
            return x  # values are immutable in a trace
        return F.reshape(x, shape)  # view, reshape, flatten, (un)squeeze

    # ---- the call ---------------------------------------------------------------------

    def arrays(self, tensors: Sequence[torch.Tensor]) -> list[np.ndarray]:
        """The kernel's arguments for these tensors: views of them (4-D ones NHWC in a conv
        group), then the folded constants."""
        self._fold(tensors)
        return self._arguments(tensors)

    def _arguments(self, tensors: Sequence[torch.Tensor]) -> list[np.ndarray]:
        out = []
        for i in self.passed:
            t = tensors[i].detach()
            if i in self.nhwc_inputs:
                t = t.permute(0, 2, 3, 1)
            out.append(_to_numpy(t))
        return out + [a for made in self._constant_arrays.values() for a in made]

    def prepare(self, tensors: Sequence[torch.Tensor]) -> dict | None:
        """The kernel's @compiler.jit function for the example tensors (their shapes, strides
        and dtypes: the constants made of them are not kept as folded), and its compile()
        request (None when tracing failed: the torch fallback is kept, and the error said)."""
        try:
            self._constant_arrays = {c.node: c.make(*c.arguments(tensors)) for c in self.constants}
            self._example = self._arguments(tensors)
            self._body_fn.__signature__ = inspect.Signature(
                [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in self._argument_names()])
            self.jit = F.jit(self._body_fn, **self._options)
            return self.jit.compile_request(*self._example)
        except (LoomError, TypeError, ValueError) as e:
            self._failed(e)
            return None

    def profiled(self) -> F.JitFunction:
        """The kernel's @compiler.jit function with profile=True: each of its loop nests
        timed (`compiler.explain(..., profile=True)`); compiled at its first call."""
        if self._profiled is None:
            self._profiled = F.jit(self._body_fn, **self._options, profile=True)
        return self._profiled

    def build(self) -> None:
        """Compile the kernel for the prepared example (from the disk cache where
        compile_in_parallel put it); a failure keeps the torch fallback (and says why)."""
        if self.error is not None:
            return
        try:
            self.jit.specialize(*self._example)
        except (LoomError, TypeError, ValueError) as e:
            self._failed(e)

    def _failed(self, e: Exception) -> None:
        self.error = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__

    def _argument_names(self) -> list[str]:
        """The kernel's argument names (what explain shows): the graph's, then each constant's."""
        roles = {CONV: ("filter", "bias"), aten.t.default: ("transposed",), aten.permute.default: ("permuted",),
                 aten.transpose.int: ("transposed",)}
        names = [self.placeholders[i].name for i in self.passed]
        for node, made in self._constant_arrays.items():
            kinds = roles.get(node.target, ("scale", "shift"))
            names += [f"{node.name}_{kinds[k]}" for k in range(len(made))]
        return [n if n.isidentifier() and not n.startswith("scalar") else f"arg{i}" for i, n in enumerate(names)]

    def forward(self, *tensors):
        if self.error is not None:
            return self.fallback(*tensors)
        arrays = self.arrays(tensors)
        self.last_arrays = arrays
        return self.torch_results(self.jit(*arrays))

    def torch_results(self, result):
        """The kernel's result as torch's: tensors viewing its arrays (NHWC ones as NCHW)."""
        results = (result,) if self.single else result
        outs = []
        for r, shape, nhwc in zip(results, self.result_shapes, self.result_nhwc):
            t = _to_torch(r) if shape is None else _to_torch(r).view(shape)
            outs.append(t.permute(0, 3, 1, 2) if nhwc else t)
        return outs[0] if self.single else tuple(outs)


# --------------------------------------------------------------------------------------
# A whole graph: partitions in Loom, the rest in torch
# --------------------------------------------------------------------------------------


@dataclass
class Placement:
    """Where one ATen op of the graph runs, and why."""

    node: str
    op: str
    where: str  # "loom" or "torch"
    partition: str | None = None
    reason: str | None = None


_recording = threading.local()


@dataclass
class TorchProgram:
    """A captured graph with its Loom partitions: call it with the graph's tensors."""

    module: Callable  # the partitioned graph module (or the original, left to torch)
    placements: list[Placement] = field(default_factory=list)
    partitions: list[LoomPartition] = field(default_factory=list)
    whole_reason: str | None = None  # why the whole graph stays in torch
    compile_seconds: float = 0.0  # capture, partitioning and Loom's kernels (in parallel processes)

    def __call__(self, *args):
        programs = getattr(_recording, "programs", None)
        if programs is not None and self not in programs:
            programs.append(self)
        run = getattr(_recording, "runner", None)
        return self.module(*args) if run is None else run(self, args)

    @property
    def ops(self) -> list[Placement]:
        """The placements of the graph's ops (an item taken of a result is not one)."""
        return [p for p in self.placements if p.op != "getitem"]

    def report(self) -> str:
        """Which ops ran in Loom (by kernel), which in torch and why."""
        lines = []
        ops = self.ops
        loom_ops = [p for p in ops if p.where == "loom"]
        if self.whole_reason:
            lines.append(f"the whole graph stays in torch: {self.whole_reason}")
        kernels = [p for p in self.partitions if p.error is None]
        lines.append(f"{len(ops)} ATen ops: {len(loom_ops)} in Loom ({len(kernels)} kernels), "
                     f"{len(ops) - len(loom_ops)} in torch; compiled in {self.compile_seconds:.2f} s")
        for p in self.partitions:
            members = Counter(q.op for q in ops if q.partition == p.name)
            body = ", ".join(f"{k} x{v}" if v > 1 else k for k, v in members.most_common())
            layout = ", NHWC inside" if p.has_conv else ""
            state = "" if p.error is None else f"; left to torch: Loom could not compile it: {p.error}"
            lines.append(f"  loom kernel {p.name}: {body}{layout}{state}")
        reasons = Counter((q.op, q.reason) for q in ops if q.where == "torch")
        if reasons:
            lines.append("in torch:")
            for (op, reason), count in reasons.most_common():
                lines.append(f"  {op}{f' x{count}' if count > 1 else ''}: {reason}")
        return "\n".join(lines)


def running_with(runner: Callable):
    """Inside the block a TorchProgram runs as `runner(program, args)` says (an interpreter
    that times each node: compiler/explain/torch.py) in place of its module."""
    return F.thread_setting(_recording, "runner", runner)


def recording():
    """The TorchPrograms that run inside the block, in the order they first ran (the list
    the block gets)."""
    ran: list[TorchProgram] = []
    return F.thread_setting(_recording, "programs", ran)


def _capture(fn: Callable, inputs: Sequence) -> torch.fx.GraphModule:
    """The ATen graph of fn on these inputs: functionalized (no in-place ops: an input's
    mutation is a copy_ back at the end), dead code gone. Traced on fake tensors: nothing
    runs, so no side effect happens (it happens at each call, once). Outside dynamo's tracing
    context, whose fake tensors have symbolic sizes: make_fx makes its own, of static sizes."""
    # (a graph module run node by node keeps each node's meta, `nn_module_stack` among it, for layer_name)
    run = torch.fx.Interpreter(fn).run if isinstance(fn, torch.fx.GraphModule) else fn
    with torch.no_grad(), torch._guards.tracing(None), torch.fx.traceback.preserve_node_meta():
        gm = make_fx(torch.func.functionalize(run), tracing_mode="fake")(*inputs)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def _whole_graph_reason(inputs: Sequence) -> str | None:
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    if any(isinstance(t, torch.SymInt | torch.SymFloat) for t in inputs) or any(
            isinstance(d, torch.SymInt) for t in tensors for d in t.shape):
        return "dynamic shapes (Loom compiles for static shapes: torch.compile(..., dynamic=False))"
    if any(t.device.type != "cpu" for t in tensors):
        return "tensors off the CPU"
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return ("autograd: the graph needs gradients (run it under torch.no_grad() or torch.inference_mode() "
                "to use Loom; Loom's kernels have no backward)")
    return None


def compile_graph(fn: Callable, inputs: Sequence, *, state: frozenset[int] = frozenset(), freeze: bool = False,
                  pipeline: str = "default", num_threads: int | None = None, cache: bool = True,
                  algorithms: str = "exact") -> TorchProgram:
    """Capture `fn` (a graph module or a function of tensors) on `inputs`, partition it and
    compile the Loom partitions: a TorchProgram that runs the same computation. `state`:
    the positions of the inputs that are a model's parameters and buffers (the tensors Loom
    folds into constants, checked at each call; with freeze=True, never checked).
    `algorithms="fast"`: 3x3 stride-1 convs by Winograd where the cost model estimates it
    faster, the filters of the folded ones transformed as they are folded
    (`compile(algorithms="fast")`; the bound in docs/guide/winograd.md)."""
    check_algorithms(algorithms)
    reason = _whole_graph_reason(inputs)
    if reason is not None:
        return TorchProgram(fn, whole_reason=reason)
    start = time.perf_counter()
    try:
        gm = _capture(fn, inputs)
    except RuntimeError as e:  # (make_fx's refusals: data-dependent values, ops fake tensors cannot run)
        return TorchProgram(fn, whole_reason=f"make_fx could not capture it: {str(e).strip().splitlines()[0]}")
    # (by name: fusing the partitions makes the graph anew)
    state_names = {n.name for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder") if i in state}
    if num_threads is None:
        num_threads = torch.get_num_threads()
    support = LoomSupport()
    partitioner = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=True)
    proposed = partitioner.propose_partitions()
    order = [n.name for n in gm.graph.nodes if n.op == "call_function"]  # the report's order (fusing moves nodes)
    placements: dict[str, Placement] = {}
    kept = []
    for part in proposed:
        if any(n.target in COMPUTE for n in part.nodes):
            kept.append(part)
            continue
        for n in part.nodes:
            placements[n.name] = Placement(n.name, _name(n.target), "torch",
                                           reason="no matmul or conv2d in its group (elementwise ops and views "
                                                  "alone stay in torch)")
    in_loom = {n for p in kept for n in p.nodes}
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.name not in placements and n not in in_loom:
            placements[n.name] = Placement(n.name, _name(n.target), "torch",
                                           reason=support.reasons.get(n, "it would join two Loom groups through "
                                                                         "torch"))
    fused = partitioner.fuse_partitions(kept, prefix="loom_") if kept else gm
    partitions = []
    for node in list(fused.graph.nodes):
        if node.op != "call_module" or not node.target.startswith("loom_"):
            continue
        fixed = frozenset(j for j, a in enumerate(node.args) if a.op == "placeholder" and a.name in state_names)
        part = LoomPartition(node.target, getattr(fused, node.target), fixed=fixed, freeze=freeze, pipeline=pipeline,
                             num_threads=num_threads, cache=cache, algorithms=algorithms)
        for m in part.graph_nodes:
            placements[m.name] = Placement(m.name, _name(m.target), "loom", partition=part.name)
        setattr(fused, node.target, part)
        partitions.append(part)
    for node in fused.graph.nodes:
        # a Loom result is NHWC where torch's was NCHW-contiguous: the views torch still
        # takes of it become reshapes (a view where the strides allow, else a copy)
        if node.op == "call_function" and node.target in (aten.view.default, aten._unsafe_view.default):
            node.target = aten.reshape.default
    fused.recompile()
    examples = {node.target: [_example(_val(a)) for a in node.args] for node in fused.graph.nodes
                if node.op == "call_module" and isinstance(getattr(fused, node.target), LoomPartition)}
    requests = [part.prepare(examples[part.name]) for part in partitions]
    compile_in_parallel([r for r in requests if r is not None])  # (into the disk cache: build() loads them)
    for part in partitions:
        part.build()
        if part.error is not None:
            for pl in placements.values():
                if pl.partition == part.name:
                    pl.where, pl.reason = "torch", f"Loom could not compile its group: {part.error}"
    return TorchProgram(fused, [placements[n] for n in order if n in placements], partitions,
                        compile_seconds=time.perf_counter() - start)


def _example(fake: torch.Tensor) -> torch.Tensor:
    """A tensor of zeros with the shape, strides and dtype the capture gave a value (what a
    partition is compiled for; its values matter to nothing)."""
    extent = 1 + sum((d - 1) * s for d, s in zip(fake.shape, fake.stride())) if fake.numel() else 0
    return torch.zeros(extent, dtype=fake.dtype).as_strided(fake.shape, fake.stride())


def torch_backend(gm: torch.fx.GraphModule, example_inputs: Sequence, **options) -> Callable:
    """A `torch.compile` backend: `torch.compile(model, backend=compiler.torch_backend)`.
    Options (through functools.partial): pipeline=, num_threads= (torch's by default), cache=,
    freeze= (True: the model's parameters and buffers never change; see compile_graph),
    algorithms= ("fast": Winograd's convolution allowed; see compile_graph)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    # the parameters and buffers: the placeholders whose source dynamo says is a module's (L['self']._parameters[...])
    state = frozenset(i for i, n in enumerate(placeholders) if "grapharg" in n.meta
                      and is_from_unspecialized_param_buffer_source(n.meta["grapharg"].source))
    return compile_graph(gm, list(example_inputs), state=state, **options)


def from_torch(model: torch.nn.Module, example_inputs: Sequence, **options) -> TorchProgram:
    """The model captured on `example_inputs` (a tuple of tensors), its Loom partitions
    compiled: a TorchProgram called with inputs of the example's shapes and dtypes alone (the
    parameters and buffers are read from the model at each call). Options: those of
    torch_backend."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"from_torch takes a torch.nn.Module, got {type(model).__name__}")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    if model.training:
        raise ValueError("from_torch compiles a model for inference: call model.eval() first (batch norm and "
                         "dropout behave differently in training)")
    names = [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()]
    state = dict(model.named_parameters()) | dict(model.named_buffers())

    def run(params, *inputs):
        return torch.func.functional_call(model, params, inputs)

    with torch.no_grad():  # inference: the parameters' requires_grad does not matter
        program = compile_graph(lambda *flat: run(dict(zip(names, flat[:len(names)])), *flat[len(names):]),
                                [*(state[n] for n in names), *example_inputs], state=frozenset(range(len(names))),
                                **options)
    return _Bound(program, model, names, list(example_inputs))


def _form(value) -> tuple:
    """What the capture fixed of a tensor: its shape and dtype (of anything else, its value)."""
    return (tuple(value.shape), value.dtype) if isinstance(value, torch.Tensor) else (value,)


def _describe(form: tuple) -> str:
    return f"{form[0]} {str(form[1]).removeprefix('torch.')}" if len(form) == 2 else repr(form[0])


def _settings(model: torch.nn.Module) -> dict[str, Any]:
    """The model's public plain attributes, module by module (numbers, strings, flags and
    tuples of them: training, a batch norm's eps, a scale): the capture read them as constants
    (torch's own marks, such as torch.compile's `_is_torch_compile`, are private)."""
    plain = (bool, int, float, str, type(None))
    return {f"{name}.{key}".lstrip("."): v for name, m in model.named_modules() for key, v in vars(m).items()
            if not key.startswith("_") and (isinstance(v, plain) or isinstance(v, tuple)
                                            and all(isinstance(x, plain) for x in v))}


class _Bound(TorchProgram):
    """A TorchProgram that supplies the model's parameters itself, and checks that what its
    capture fixed (the shapes and dtypes of the tensors, the model's plain attributes) holds."""

    def __init__(self, program: TorchProgram, model: torch.nn.Module, names: list[str], example_inputs: list):
        super().__init__(program.module, program.placements, program.partitions, program.whole_reason,
                         program.compile_seconds)
        self.model = model
        self.names = names
        state = dict(model.named_parameters()) | dict(model.named_buffers())
        self.captured = [_form(v) for v in [*(state[n] for n in names), *example_inputs]]
        self.settings = _settings(model)

    def __call__(self, *inputs):
        again = ("call compiler.from_torch(model, example) again, or use torch.compile(model, "
                 "backend=compiler.torch_backend), which compiles again when they change")
        if self.model.training:
            raise ValueError("the model is in training mode; from_torch captured it for inference: call "
                             "model.eval() (or use torch.compile(model, backend=compiler.torch_backend), which runs "
                             "training mode in torch)")
        settings = _settings(self.model)
        if settings != self.settings:
            key = next(k for k in settings.keys() | self.settings.keys() if settings.get(k) != self.settings.get(k))
            raise ValueError(f"the model's attribute {key} is {settings.get(key)!r}, {self.settings.get(key)!r} when "
                             f"from_torch captured it: a from_torch program is fixed to the model's attributes; "
                             f"{again}")
        state = dict(self.model.named_parameters()) | dict(self.model.named_buffers())
        tensors = [*(state[n] for n in self.names), *inputs]
        if len(tensors) != len(self.captured):
            raise TypeError(f"this program takes {len(self.captured) - len(self.names)} inputs (as its example), "
                            f"got {len(inputs)}")
        labels = self.names + [f"input #{i}" for i in range(len(inputs))]
        for label, value, captured in zip(labels, tensors, self.captured):
            if _form(value) != captured:
                raise ValueError(f"{label} is {_describe(_form(value))}, {_describe(captured)} in the example: a "
                                 f"from_torch program is fixed to its example's shapes and dtypes; {again}")
        with torch.no_grad():
            out = super().__call__(*tensors)
        return out[0] if isinstance(out, tuple | list) and len(out) == 1 else out

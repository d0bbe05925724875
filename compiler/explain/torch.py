"""`compiler.explain` of a torch model (a torch.compile'd one, or a from_torch program):
which ops ran in Loom and which in torch (`TorchProgram.report`), then each Loom kernel's
report on the arrays of its last call; with `profile=True`, in place of the kernels'
reports, where each call of the model spends its time (`profile_model`). Imports torch
(compiler.frontends.torch_fx)."""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from compiler.explain.report import explain_function
from compiler.frontends.torch_fx import LoomPartition, TorchProgram, layer_name, node_flops, recording, running_with
from compiler.measure.peak import peak_gflops
from passes.support.diagnostics import LoomError

#: a profile line's kinds, in the order the summary gives them
KINDS = {"loom": "in Loom's loop nests", "kernel": "in Loom's kernels outside their nests (allocation, zero fills)",
         "crossing": "crossing between torch and Loom (the kernels' arguments and results)", "torch": "in torch's ops",
         "between": "between the graph's nodes (the profile's own interpreter: absent from a call not profiled)",
         "outside": "outside the graphs (dynamo's guards, Python)"}


@dataclass
class ProfileLine:
    """Where a share of each call of the model went: seconds per call."""

    kind: str  # one of KINDS
    where: str  # the Loom kernel's name, or "torch"
    layer: str  # the model's module (`layer1.0.conv1`) or ATen node, "" for a kind's whole
    op: str  # the nest's op (`loom.tag`s) or the ATen op
    seconds: float = 0.0
    flops: int = 0  # of the conv2d and matmul ops it runs, per call
    dtype: str = "f32"  # of their operands: the peak it is set against
    threads: int = 1

    def gflops(self) -> float | None:
        return self.flops / self.seconds / 1e9 if self.flops and self.seconds > 0 else None


@dataclass
class ModelProfile:
    """`profile_model`'s result: per call of the model (the mean of `calls`), the time of
    each Loom kernel's loop nests by layer, of each op torch ran, of the crossings between
    them; `str()` renders it."""

    lines: list[ProfileLine]
    calls: int
    seconds: float  # a call of the model, as profiled
    crossings: int  # per call: the Loom kernels' calls x 2 (torch -> Loom, Loom -> torch)
    peaks: dict[tuple[str, int], float | None] = field(default_factory=dict)  # (dtype, threads) -> GFLOP/s

    def total(self, kind: str) -> float:
        return sum(line.seconds for line in self.lines if line.kind == kind)

    def share_of_peak(self, line: ProfileLine) -> float | None:
        gflops, peak = line.gflops(), self.peaks.get((line.dtype, line.threads))
        return gflops / peak if gflops and peak else None

    def __str__(self) -> str:
        peaks = ", ".join(f"{dtype} on {threads} thread{'s' * (threads != 1)} {p:.1f} GFLOP/s"
                          for (dtype, threads), p in self.peaks.items() if p)
        out = [f"profile: each of {self.calls} calls of the model {self.seconds * 1e3:.3f} ms"
               + (f" (the FMA peak: {peaks})" if peaks else "")]
        for kind, what in KINDS.items():
            spent = self.total(kind)
            extra = f", {self.crossings} crossings per call" if kind == "crossing" else ""
            out.append(f"  {spent * 1e3:8.3f} ms {spent / self.seconds:6.1%}  {what}{extra}")
        rows = [("ms", "share", "GFLOP/s", "of peak", "where", "layer", "op")]
        for line in self.lines:
            if line.kind in ("between", "outside"):
                continue
            gflops, share = line.gflops(), self.share_of_peak(line)
            rows.append((f"{line.seconds * 1e3:.3f}", f"{line.seconds / self.seconds:.1%}",
                         f"{gflops:.1f}" if gflops else "", f"{share:.0%}" if share else "",
                         line.where if line.kind != "crossing" else f"{line.where} crossing",
                         line.layer, line.op))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        out += ["", *("  ".join(f"{c:>{w}}" if i < 4 else f"{c:<{w}}" for i, (c, w) in enumerate(zip(r, widths)))
                      .rstrip() for r in rows)]
        return "\n".join(out)


class _Timer:
    """Times each node of the programs that run while it is installed (`running_with`):
    a Loom partition's arguments, kernel (its profiled variant) and results, each op torch
    runs; the lines by (kind, where, layer), in the order they first ran."""

    def __init__(self):
        self.spent: dict[tuple[str, str, str], list] = {}  # (kind, where, layer) -> [op, seconds]
        self.kernels: dict[str, tuple[LoomPartition, object]] = {}  # kernel name -> (partition, Kernel)
        self.crossings = 0
        self.timed = 0.0  # seconds: all the lines'

    def add(self, kind: str, where: str, layer: str, op: str, seconds: float) -> None:
        self.spent.setdefault((kind, where, layer), [op, 0.0])[1] += seconds
        self.timed += seconds

    def __call__(self, program: TorchProgram, args: Sequence):
        start, timed = time.perf_counter(), self.timed
        result = _Timed(program.module, self).run(*args)
        self.add("between", "", "", "", time.perf_counter() - start - (self.timed - timed))
        return result

    def loom(self, part: LoomPartition, tensors: Sequence[torch.Tensor]):
        fn = part.profiled()
        t0 = time.perf_counter()
        arrays = part.arrays(tensors)
        t1 = time.perf_counter()
        result = fn(*arrays)
        t2 = time.perf_counter()
        out = part.torch_results(result)
        t3 = time.perf_counter()
        if part.name not in self.kernels:
            self.kernels[part.name] = (part, fn.kernel(*arrays))
        self.add("crossing", part.name, "", "arguments and results", (t1 - t0) + (t3 - t2))
        self.add("kernel", part.name, "", "outside its nests", t2 - t1)
        self.crossings += 2
        return out


class _Timed(torch.fx.Interpreter):
    """A graph run node by node, each node timed into `timer` (a Loom partition by its parts)."""

    def __init__(self, module: torch.fx.GraphModule, timer: _Timer):
        super().__init__(module)
        self.timer = timer

    def run_node(self, n: torch.fx.Node):
        if n.op == "call_module" and isinstance(part := self.module.get_submodule(n.target), LoomPartition) \
                and part.error is None:
            return self.timer.loom(part, self.fetch_args_kwargs_from_env(n)[0])
        if n.op not in ("call_function", "call_method", "call_module") or n.target is operator.getitem:
            return super().run_node(n)
        start = time.perf_counter()
        result = super().run_node(n)
        op = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", str(n.target))
        self.timer.add("torch", "torch", n.name, op, time.perf_counter() - start)
        return result


def profile_model(fn: Callable, *args, calls: int = 5) -> ModelProfile:
    """Where each call of a torch.compile'd model (backend `compiler.torch_backend`, or a
    from_torch program) spends its time: `fn(*args)` called once to compile each Loom
    kernel again with `profile=True` (compiler/jit/kernel.py `Kernel.profile`: each loop
    nest timed with the cycle counter), then `calls` times, each graph run node by node:
    every op torch runs, each kernel's nests by the layer (module) they compute, the
    kernel's time outside them, and the crossings (a partition's arguments and results
    made from torch's tensors and back)."""
    if not isinstance(calls, int) or calls < 1:
        raise ValueError(f"calls must be a positive integer, got {calls!r}")
    timer = _Timer()
    with torch.no_grad(), recording() as ran, running_with(timer):
        fn(*args)  # (compiles the profiled kernels)
        if not ran:
            raise LoomError("no graph ran through Loom's backend (torch.compile(model, backend=compiler."
                            "torch_backend)?): nothing to profile")
        timer.spent.clear()
        timer.crossings = 0
        for _, kernel in timer.kernels.values():
            kernel.reset_profile()
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        seconds = (time.perf_counter() - start) / calls
    return _lines(timer, calls, seconds)


def _lines(timer: _Timer, calls: int, seconds: float) -> ModelProfile:
    lines: list[ProfileLine] = []
    peaks: dict[tuple[str, int], float | None] = {}
    for (kind, where, layer), (op, spent) in timer.spent.items():
        if kind != "kernel":
            lines.append(ProfileLine(kind, where, layer, op, spent / calls))
            continue
        part, kernel = timer.kernels[where]
        threads = part.jit.num_threads or 1
        flops, dtypes = {}, {}
        for n in part.graph_nodes:
            if work := node_flops(n):
                name = layer_name(n)
                flops[name] = flops.get(name, 0) + work
                dtypes[name] = _PEAKS.get(_tensor_dtype(n.args[0]), "f32")
        nests: dict[str, ProfileLine] = {}
        for row in kernel.profile():
            name = row.location.rsplit(":", 2)[0] if row.location else ""
            line = nests.get(name)
            if line is None:
                line = nests[name] = ProfileLine("loom", where, name, row.tag, 0.0, flops.get(name, 0),
                                                 dtypes.get(name, "f32"), threads)
            elif row.tag not in line.op.split("+"):
                line.op += f"+{row.tag}"
            line.seconds += row.seconds / calls
        inside = sum(line.seconds for line in nests.values())
        lines += [*nests.values(), ProfileLine("kernel", where, "", op, max(spent / calls - inside, 0.0))]
        for line in nests.values():
            if line.flops and (line.dtype, threads) not in peaks:
                try:
                    peaks[(line.dtype, threads)] = peak_gflops(line.dtype, threads)
                except LoomError:
                    peaks[(line.dtype, threads)] = None
    counted = sum(line.seconds for line in lines)
    lines.append(ProfileLine("outside", "", "", "", max(seconds - counted, 0.0)))
    return ModelProfile(lines, calls, seconds, timer.crossings // calls, peaks)


#: the peak an operand's dtype is set against
_PEAKS = {torch.bfloat16: "bf16", torch.float64: "f64"}


def _tensor_dtype(node: torch.fx.Node) -> torch.dtype | None:
    val = node.meta.get("val")
    return val.dtype if isinstance(val, torch.Tensor) else None


def describe(program: TorchProgram, **options) -> str:
    """The partition report, then each Loom kernel's report on the arrays of its last call."""
    parts = [program.report()]
    for p in program.partitions:
        if p.error is None and p.last_arrays is not None:
            parts.append(f"== loom kernel {p.name} ==\n{explain_function(p.jit, *p.last_arrays, **options)}")
    return "\n\n".join(parts)


def explain_torch(fn: Callable, *args, profile: bool = False, **options) -> str:
    """`compiler.explain` of a torch.compile'd model (or a from_torch program): call it on
    `args`, then report on each graph that ran through the backend; `profile=True`: the
    partitions, then the model's profile (`profile_model`) in place of each kernel's report."""
    with recording() as ran, torch.no_grad():
        fn(*args)
    if not ran:
        return "no graph ran through Loom's backend (torch.compile(model, backend=compiler.torch_backend)?)"
    if profile:
        return "\n\n".join([*(p.report() for p in ran), str(profile_model(fn, *args, **options))])
    return "\n\n".join(f"=== graph {i} ===\n{describe(p, **options)}" if len(ran) > 1 else describe(p, **options)
                       for i, p in enumerate(ran))

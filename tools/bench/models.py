"""`loom-bench --model`: whole torch models through `compiler.torch_backend` beside torch eager.

Each model (ResNet-18 and the other CNNs of `CNNS` at 224x224, from torchvision with random
weights; the MLP block
128x768 -> 3072 -> relu -> 768 of a transformer, `batch` sequences of 128 tokens) is
compiled with `torch.compile(model, backend=compiler.torch_backend)` per batch size and
thread count (Loom's kernels for torch's thread count), checked against torch eager, and
timed beside it: one process, interleaved, medians of rounds, inference (`torch.no_grad`).
The compile time is the first call's, cold (an empty disk cache) and warm (the same
program built again after `torch._dynamo.reset()` and an empty memory cache: every kernel
from the disk cache). Needs torch (and torchvision for ResNet-18): the `bench` extra.
`--algorithms fast` lets Loom use Winograd's convolution (`torch_backend(algorithms="fast")`).
`--peers` adds inductor (`torch.compile` with freezing) and the runtimes of tools/bench/peers.py,
timed in the same rounds; `--profile` the model's profile per row (compiler/explain/torch.py).
"""

from __future__ import annotations

import copy
import functools
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from compiler.driver import kernel_cache
from compiler.measure.runner import timed_rounds
from tools.bench import peers as anchors
from tools.bench.common import bench_machine

#: the CNNs of torchvision it builds (random weights, 224x224 inputs): ResNet-18 and its
#: deeper kin, a VGG, a RegNet (grouped convolutions and squeeze-excitation) and a
#: MobileNet (depthwise convolutions), so that a schedule is tuned for CNNs, not for one
CNNS = ("resnet18", "resnet50", "vgg11", "regnet_y_400mf", "mobilenet_v2")
MODELS = (*CNNS, "mlp")
#: seconds of sleep before each block of a model's runs on several threads (see measure_model)
MODEL_SETTLE = 1.0


@dataclass
class ModelRow:
    model: str
    batch: int
    threads: int
    dtype: str  # "f32" or "bf16" (model.to(torch.bfloat16) on bf16 inputs)
    loom: float  # median seconds per call
    eager: float
    speedups: tuple[float, ...]  # eager / loom, per round
    rel_err: float  # max |loom - eager| / max |eager|
    in_loom: int  # ATen ops run by Loom's kernels
    ops: int
    kernels: int
    cold: float  # seconds: torch.compile + first call, empty disk cache
    warm: float  # the same, every kernel from the disk cache
    #: inductor's, ONNX Runtime's and OpenVINO's median seconds and relative errors (of torch eager), by name
    #: (`--peers`)
    peers: dict[str, float] = field(default_factory=dict)
    peer_errors: dict[str, float] = field(default_factory=dict)
    profile: Any = None  # `--profile`: compiler.explain.torch.ModelProfile

    @property
    def ok(self) -> bool:
        return self.rel_err <= (1e-3 if self.dtype == "f32" else 2e-2)  # bf16: of torch's own bf16 run


def build_model(name: str, batch: int):
    """(model in eval mode, example input) for a model name."""
    import torch

    torch.manual_seed(0)
    if name in CNNS:
        try:
            import torchvision
        except ImportError:
            raise RuntimeError(f"--model {name} needs torchvision (pip install torchvision)") from None
        return getattr(torchvision.models, name)().eval(), torch.randn(batch, 3, 224, 224)
    if name == "mlp":
        nn = torch.nn
        return nn.Sequential(nn.Linear(768, 3072), nn.ReLU(), nn.Linear(3072, 768)).eval(), torch.randn(batch, 128, 768)
    raise ValueError(f"unknown model {name!r}: expected one of {', '.join(MODELS)}")


def _build(model, x, threads: int, freeze: bool = False, algorithms: str = "exact"):
    """torch.compile with Loom's backend and the first call: (compiled, its program, seconds).
    `freeze`: the parameters folded once and never checked again (`torch_backend(freeze=True)`);
    `algorithms`: "fast" lets it use Winograd (`torch_backend(algorithms="fast")`)."""
    import torch

    from compiler import torch_backend
    from compiler.frontends.torch_fx import recording

    torch._dynamo.reset()
    start = time.perf_counter()
    fast = torch.compile(model, backend=functools.partial(torch_backend, num_threads=threads, freeze=freeze,
                                                          algorithms=algorithms), dynamic=False)
    with recording() as ran:
        fast(x)
    return fast, ran, time.perf_counter() - start


def _inductor(model, x) -> anchors.Peer:
    """torch.compile's own backend, with `freezing` (the parameters folded as constants, as
    the runtimes do: the way inductor runs inference fastest), compiled now."""
    import torch
    from torch._inductor import config

    compiled = torch.compile(copy.deepcopy(model), dynamic=False)
    with config.patch(freezing=True):
        compiled(x)  # (freezing is read when it compiles)
    return anchors.Peer("inductor (freezing)", lambda: compiled(x).float())


def measure_model(name: str, batch: int, threads: int, *, budget: float, repeat: int, rounds: int,
                  cache_folder: str, dtype: str = "f32", with_runtimes: bool = False,
                  freeze: bool = False, profile: bool = False, algorithms: str = "exact") -> ModelRow:
    import torch

    from compiler.explain.torch import profile_model

    torch.set_num_threads(threads)
    model, x = build_model(name, batch)
    if dtype == "bf16":
        model, x = model.to(torch.bfloat16), x.to(torch.bfloat16)
    os.environ["LOOM_CACHE_DIR"] = cache_folder
    kernel_cache.clear()  # nothing from memory: cold compiles, warm loads from disk
    _, _, cold = _build(model, x, threads, freeze, algorithms)
    kernel_cache.clear()
    fast, ran, warm = _build(model, x, threads, freeze, algorithms)
    with torch.no_grad():
        got, want = fast(x), model(x)
    rel = float((got.double() - want.double()).abs().max() / want.double().abs().max())
    runtimes = [_inductor(model, x), *anchors.model_peers(model, x, threads, dtype)] if with_runtimes else []
    scale = float(want.double().abs().max())
    peer_errors = {p.name: p.check(want.double().numpy()) / scale for p in runtimes}
    # on several threads, a second of quiet before each block of runs: the runtimes' thread
    # pools spin on after their calls and took the cores from Loom's next block (ResNet-18 fast,
    # batch 1, two threads, znver4, one run each: Loom 17.40 ms with 0.2 s, 13.28 with 1 s,
    # 13.04 with no peers; the peers' own times the same either way. Two-thread rounds on
    # this 2-core VM still vary: read the min-max column)
    timing = timed_rounds([lambda: fast(x), lambda: model(x), *(p.run for p in runtimes)], budget=budget,
                          at_most=repeat, rounds=rounds, settle=MODEL_SETTLE if threads > 1 else 0.0)
    placements = [p for program in ran for p in program.ops]
    kernels = sum(1 for program in ran for p in program.partitions if p.error is None)
    return ModelRow(name, batch, threads, dtype, timing.median(0), timing.median(1), timing.ratios(1), rel,
                    sum(p.where == "loom" for p in placements), len(placements), kernels, cold, warm,
                    {p.name: timing.median(2 + i) for i, p in enumerate(runtimes)}, peer_errors,
                    profile_model(fast, x, calls=max(rounds, 3)) if profile else None)


def run_models(names: Sequence[str], *, batches: Sequence[int] = (1, 8), threads: Sequence[int] = (1, 2),
               budget: float = 2.0, repeat: int = 20, rounds: int = 5, dtype: str = "f32",
               with_runtimes: bool = False, on_row: Callable[[ModelRow], None] | None = None,
               freeze: bool = False, profile: bool = False, algorithms: str = "exact") -> list[ModelRow]:
    import torch

    rows = []
    with tempfile.TemporaryDirectory(prefix="loom-bench-model-") as folder, torch.no_grad():
        before = os.environ.get("LOOM_CACHE_DIR")
        try:
            for name in names:
                for batch in batches:
                    for t in threads:
                        rows.append(measure_model(name, batch, t, budget=budget, repeat=repeat, rounds=rounds,
                                                  cache_folder=folder, dtype=dtype, with_runtimes=with_runtimes,
                                                  freeze=freeze, profile=profile, algorithms=algorithms))
                        if on_row:
                            on_row(rows[-1])
        finally:
            if before is None:
                os.environ.pop("LOOM_CACHE_DIR", None)
            else:
                os.environ["LOOM_CACHE_DIR"] = before
    return rows


def markdown_models(rows: list[ModelRow]) -> str:
    names = list(dict.fromkeys(name for r in rows for name in r.peers))
    out = ["| model | dtype | batch | threads | Loom ms | torch eager ms | eager/Loom | eager/Loom min-max | rel. error "
           "| ops in Loom | compile cold s | compile warm s | check |"
           + "".join(f" {name} ms | {name}/Loom |" for name in names),
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|" + "---:|---:|" * len(names)]
    for r in rows:
        peers = "".join(f" {r.peers[n] * 1e3:.2f} | {r.peers[n] / r.loom:.2f} |" if n in r.peers else " - | - |"
                        for n in names)
        out.append(f"| {r.model} | {r.dtype} | {r.batch} | {r.threads} | {r.loom * 1e3:.2f} | {r.eager * 1e3:.2f} "
                   f"| {np.median(r.speedups):.2f} | {min(r.speedups):.2f}-{max(r.speedups):.2f} | {r.rel_err:.1e} "
                   f"| {r.in_loom}/{r.ops} ({r.kernels} kernels) | {r.cold:.1f} | {r.warm:.1f} "
                   f"| {'ok' if r.ok else 'MISMATCH'} |{peers}")
    errors = [f"- {n}, {r.model} batch {r.batch}, {r.threads} thread{'s' * (r.threads > 1)}: {e:.1e}"
              for r in rows for n, e in r.peer_errors.items()]
    return "\n".join(out) + ("\npeers' relative errors (of torch eager):\n" + "\n".join(errors) if errors else "")


def models_json(rows: list[ModelRow]) -> list[dict]:
    out = []
    for r in rows:
        row = {f.name: getattr(r, f.name) for f in fields(r) if f.name != "profile"}
        if r.profile is not None:
            row["profile"] = [{**asdict(line), "share_of_peak": r.profile.share_of_peak(line)}
                              for line in r.profile.lines]
        out.append({**row, "speedup": float(np.median(r.speedups)), "ok": r.ok})
    return out


def model_mode(args) -> int:
    """`loom-bench --model`: the table (an error line when torch is not installed)."""
    try:
        import torch
    except ImportError:
        print("loom-bench: error: --model needs torch (pip install 'loomir[bench]')", file=sys.stderr)
        return 1

    def progress(r) -> None:
        print(f"  {r.model} batch {r.batch}, {r.threads} thread{'s' * (r.threads > 1)}: Loom {r.loom * 1e3:.2f} ms, "
              f"eager {r.eager * 1e3:.2f} ms, compile {r.cold:.1f} s cold, {r.warm:.1f} s warm"
              f"{'' if r.ok else '  MISMATCH'}", file=sys.stderr)

    rows = run_models(args.model, batches=args.batches, threads=args.threads_list, budget=args.budget,
                      repeat=args.repeat, rounds=args.rounds, dtype=args.dtype, with_runtimes=args.peers,
                      on_row=None if args.json else progress, freeze=args.freeze, profile=args.profile,
                      algorithms=args.algorithms)
    machine = bench_machine()
    if args.json:
        print(json.dumps({"machine": machine, "torch": torch.__version__, "rows": models_json(rows)}, indent=1))
    else:
        print(f"machine: {machine}\ntorch {torch.__version__}, Loom through torch.compile(backend=compiler."
              f"torch_backend{', freeze=True' if args.freeze else ''}"
              f"{', algorithms=' + repr(args.algorithms) if args.algorithms != 'exact' else ''}), inference, {args.dtype}, "
              f"{args.rounds} round{'s' * (args.rounds != 1)}"
              + (f"\n{anchors.header()}" if args.peers else "") + "\n")
        print(markdown_models(rows))
        for r in rows:
            if r.profile is not None:
                print(f"\n{r.model} batch {r.batch}, {r.threads} thread{'s' * (r.threads > 1)}, {r.dtype}:\n{r.profile}")
    return 0 if all(r.ok for r in rows) else 1

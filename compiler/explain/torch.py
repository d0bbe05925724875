"""`compiler.explain` of a torch model (a torch.compile'd one, or a from_torch program):
which ops ran in Loom and which in torch (`TorchProgram.report`), then each Loom kernel's
report on the arrays of its last call. Imports torch (compiler.frontends.torch_fx)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from compiler.explain.report import explain_function
from compiler.frontends.torch_fx import TorchProgram, recording


def describe(program: TorchProgram, **options) -> str:
    """The partition report, then each Loom kernel's report on the arrays of its last call."""
    parts = [program.report()]
    for p in program.partitions:
        if p.error is None and p.last_arrays is not None:
            parts.append(f"== loom kernel {p.name} ==\n{explain_function(p.jit, *p.last_arrays, **options)}")
    return "\n\n".join(parts)


def explain_torch(fn: Callable, *args, **options) -> str:
    """`compiler.explain` of a torch.compile'd model (or a from_torch program): call it on
    `args`, then report on each graph that ran through the backend."""
    with recording() as ran, torch.no_grad():
        fn(*args)
    if not ran:
        return "no graph ran through Loom's backend (torch.compile(model, backend=compiler.torch_backend)?)"
    return "\n\n".join(f"=== graph {i} ===\n{describe(p, **options)}" if len(ran) > 1 else describe(p, **options)
                       for i, p in enumerate(ran))

"""Loom: compile dense tensor kernels written in Python or in the loom dialect, run them on numpy arrays.

    import compiler as loom

    @loom.jit                                # traced on the first call per signature
    def mlp(x, w, b):
        return loom.relu(x @ w + b)

    y = mlp(x, w, b)                         # numpy in, numpy out

    import compiler
    k = compiler.compile(mlir_text)          # pipeline="default" (or "naive", or a pass list)
    c = k(a, b)                              # numpy in, numpy out
    ref = compiler.reference(mlir_text, a, b)  # the same function in float64 numpy
    print(compiler.explain(mlir_text, a, b))  # loop nests, schedule decisions, GFLOP/s vs the peak
"""

from passes.support.diagnostics import LoomError
from compiler.driver import compile, reference, set_cache_size
from compiler.explain import explain
from compiler.frontends.python import (
    JitFunction, TraceError, add, broadcast_to, contiguous, conv2d, jit, matmul, multiply, relu, reshape, transpose,
)
from compiler.jit.kernel import ArgSpec, Kernel
from passes.pipelines import PIPELINES
from compiler.version import __version__


def torch_backend(gm, example_inputs, **options):
    """A `torch.compile` backend: `torch.compile(model, backend=compiler.torch_backend)`;
    see compiler.frontends.torch_fx (imports torch, which nothing else in Loom does)."""
    from compiler.frontends.torch_fx import torch_backend as backend

    return backend(gm, example_inputs, **options)


def from_torch(model, example_inputs, **options):
    """A torch model captured on `example_inputs`, its dense ops compiled by Loom (compiler.frontends.torch_fx)."""
    from compiler.frontends.torch_fx import from_torch as capture

    return capture(model, example_inputs, **options)


__all__ = ["compile", "reference", "set_cache_size", "explain", "Kernel", "ArgSpec", "LoomError", "PIPELINES",
           "jit", "JitFunction", "TraceError", "relu", "conv2d", "matmul", "add", "multiply", "transpose", "reshape",
           "broadcast_to", "contiguous", "torch_backend", "from_torch"]

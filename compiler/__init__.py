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

from compiler.diagnostics import LoomError
from compiler.driver import compile, reference, set_cache_size
from compiler.explain import explain
from compiler.frontend import (
    JitFunction, TraceError, add, broadcast_to, contiguous, conv2d, jit, matmul, multiply, relu, reshape, transpose,
)
from compiler.kernel import ArgSpec, Kernel
from compiler.pipelines import PIPELINES

__all__ = ["compile", "reference", "set_cache_size", "explain", "Kernel", "ArgSpec", "LoomError", "PIPELINES",
           "jit", "JitFunction", "TraceError", "relu", "conv2d", "matmul", "add", "multiply", "transpose", "reshape",
           "broadcast_to", "contiguous"]
__version__ = "0.1.0"

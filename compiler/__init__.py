"""Loom: compile dense tensor kernels written in the loom dialect, run them on numpy arrays.

    import compiler
    k = compiler.compile(mlir_text)          # pipeline="default" (or "naive", or a pass list)
    c = k(a, b)                              # numpy in, numpy out
    ref = compiler.reference(mlir_text, a, b)  # the same function in float64 numpy
"""

from compiler.diagnostics import LoomError
from compiler.driver import compile, reference, set_cache_size
from compiler.kernel import ArgSpec, Kernel
from compiler.pipelines import PIPELINES

__all__ = ["compile", "reference", "set_cache_size", "Kernel", "ArgSpec", "LoomError", "PIPELINES"]
__version__ = "0.1.0"

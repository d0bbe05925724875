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

`import compiler` imports none of it: each name of the API is imported from its module
when first used (PEP 562's module `__getattr__`, from `_API`), so that the package costs
nothing to import, and xDSL, the passes and LLVM load only when something is compiled
(compiler/driver.py).
"""

import sys
from importlib import import_module
from types import ModuleType

from compiler.version import __version__

#: each name of the API -> the module that defines it
_API = {
    "compile": "compiler.driver",
    "reference": "compiler.driver",
    "set_cache_size": "compiler.driver",
    "explain": "compiler.explain",
    "Kernel": "compiler.jit.kernel",
    "ArgSpec": "compiler.jit.kernel",
    "LoomError": "passes.support.diagnostics",
    "PIPELINES": "passes.pipelines",
    **dict.fromkeys(["jit", "JitFunction", "TraceError", "relu", "clamp", "conv2d", "max_pool2d", "avg_pool2d", "mean", "matmul",
                     "add", "multiply", "quantize", "dequantize", "winograd_conv2d", "winograd_filter", "pack_filter", "transpose", "reshape", "broadcast_to", "contiguous"],
                    "compiler.frontends.python"),
}

__all__ = [*_API, "torch_backend", "from_torch"]


def __getattr__(name: str):
    """The API's `name`, imported from its module at its first use (then kept here)."""
    if name not in _API:
        raise AttributeError(f"module 'compiler' has no attribute {name!r}")
    value = getattr(import_module(_API[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})


def torch_backend(gm, example_inputs, **options):
    """A `torch.compile` backend: `torch.compile(model, backend=compiler.torch_backend)`;
    see compiler.frontends.torch_fx (imports torch, which nothing else in Loom does)."""
    from compiler.frontends.torch_fx import torch_backend as backend

    return backend(gm, example_inputs, **options)


def from_torch(model, example_inputs, **options):
    """A torch model captured on `example_inputs`, its dense ops compiled by Loom (compiler.frontends.torch_fx)."""
    from compiler.frontends.torch_fx import from_torch as capture

    return capture(model, example_inputs, **options)


class _Package(ModuleType):
    """The package's class: `compiler.jit` and `compiler.explain` name both a subpackage
    and a function of the API (the `@jit` decorator, `explain()`). Importing a submodule
    binds its name on the package; for these two the API's function keeps the name (the
    subpackage is in sys.modules, where `import compiler.jit.engine` finds it)."""

    def __setattr__(self, name: str, value) -> None:
        if name in _API and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

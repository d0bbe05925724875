"""`compiler.explain`: what Loom did to a kernel and why, and how fast it runs.

    report = compiler.explain(fn, x, w, b)        # a @compiler.jit function and its arguments
    report = compiler.explain(mlir_text, a, b)    # or loom-dialect text (or a Kernel compiled with stages=True)
    print(report)                                 # loom-run FILE --explain prints the same

The report has, per kernel:

- the loop nest after each stage as pseudo-code, one line per loop (Halide's
  `print_loop_nest`): the loom ops as written, the textbook loops of
  convert-loom-to-affine, and the scheduled loops (after loom-default, or the last pass
  of a pass list), optionally after loom-lower-affine (`loop_nest` prints any module);
- the schedule's decisions and their reasons, per source op, from the passes' remarks
  (passes/support/remarks.py): each matmul's plan with its tiles set against the cache sizes
  and the vector registers (passes/support/target.py), what was peeled, tiled, packed,
  vectorized, unroll-jammed, kept in registers, prefetched, run on threads or fused, and
  what a pass refused and why;
- the data movement the cost model estimates per memory level
  (passes/analysis/cost_model.py, `MatmulPlan.traffic`);
- the measured GFLOP/s on the arrays given (random ones when none are), the median of
  several calls, against the machine's FMA peak on as many threads (compiler/measure/peak.py).

The rooms: loop_nest.py (the pseudo-code, and its notation), decisions.py (the
decisions, from the remarks), report.py (the report, the measurement), torch.py (the
report on a torch model: its partitions, then each Loom kernel's; with `profile=True` the
time of each layer, each op torch ran and the crossings instead, `profile_model`).
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from compiler.explain.report import Report, explain_function, explain_source
from compiler.jit.kernel import Kernel


def explain(target, *args, **options) -> Report:
    """The report on a kernel (see the module's docstring): `target` is a `@compiler.jit`
    function (called with `args`, its arguments), loom-dialect MLIR text or a module (with
    `args` the arrays to time it on), or a Kernel compiled with `stages=True`. `options`
    go to `explain_source` (`pipeline=`, `num_threads=`, `entry=`, `stages=`, ...; a
    @compiler.jit function's own pipeline and threads by default)."""
    if type(target).__module__.split(".")[0] == "torch" or type(target).__module__ == "compiler.frontends.torch_fx":
        # (imports torch, which `import compiler` does not)
        from compiler.explain.torch import explain_torch

        return explain_torch(target, *args, **options)
    if hasattr(target, "specialize") and hasattr(target, "fn"):  # a @compiler.jit function
        return explain_function(target, *args, **options)
    if isinstance(target, Kernel):
        if "input" not in target.stages:
            raise TypeError("explain() needs the kernel's source: pass the MLIR text, or a Kernel compiled with "
                            "stages=True")
        options.setdefault("pipeline", target.pipeline)
        options.setdefault("num_threads", target.num_threads)
        options.setdefault("entry", target.entry)
        return explain_source(target.stages["input"], *args, **options)
    if isinstance(target, str | ModuleOp):
        return explain_source(target, *args, **options)
    raise TypeError(f"explain() takes a @compiler.jit function, MLIR text, a module or a Kernel, "
                    f"got {type(target).__name__}")

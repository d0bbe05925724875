"""Run a kernel on random inputs and check it against the numpy reference (`loom-run`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from compiler import numpy_reference as ref
from compiler.driver import compile, find_entry, load_module, signature


def error_bound(reduction: int, dtype: np.dtype, ref_max: float) -> float:
    """About 4*K*eps*max|ref|: the rounding a length-K f32/f64 reduction may show in any
    summation order."""
    return 4.0 * reduction * float(np.finfo(dtype).eps) * ref_max


def random_inputs(specs, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s.shape).astype(s.dtype) for s in specs]


def median_times(fns, repeat: int) -> list[float]:
    """Median seconds of each function, the runs interleaved (a, b, a, b, ...) so that
    drift in clock or load hits all of them alike."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for f, ts in zip(fns, times):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
    return [float(np.median(ts)) for ts in times]


@dataclass
class Report:
    filename: str
    entry: str
    pipeline: str
    shapes: str
    max_err: float
    bound: float
    seconds: float
    gflops: float
    compile_seconds: float
    numpy_seconds: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.max_err <= self.bound)

    def format(self) -> str:
        status = "OK" if self.ok else "MISMATCH"
        lines = [
            f"{self.filename}: @{self.entry} {self.shapes}  pipeline={self.pipeline}",
            f"  check    {status}: max |loom - numpy(f64)| = {self.max_err:.3g} (bound {self.bound:.3g})",
            f"  time     {self.seconds * 1e3:.3f} ms median  {self.gflops:.2f} GFLOP/s"
            f"  (compile {self.compile_seconds:.2f} s)",
        ]
        if self.numpy_seconds is not None:
            np_gflops = self.gflops * self.seconds / self.numpy_seconds if self.numpy_seconds else 0.0
            lines.append(
                f"  numpy    {self.numpy_seconds * 1e3:.3f} ms median  {np_gflops:.2f} GFLOP/s"
                f"  (loom/numpy speed {self.numpy_seconds / self.seconds:.3f}x)"
            )
        return "\n".join(lines)


def run_and_check(
    text: str,
    *,
    filename: str = "<source>",
    entry: str | None = None,
    pipeline: str = "naive",
    repeat: int = 5,
    seed: int = 0,
    num_threads: int | None = None,
    compare_numpy: bool = False,
) -> Report:
    module = load_module(text, filename)
    fn = find_entry(module, entry)
    inputs, outputs = signature(fn)
    t0 = time.perf_counter()
    kernel = compile(text, entry=fn.sym_name.data, pipeline=pipeline, num_threads=num_threads, filename=filename)
    compile_seconds = time.perf_counter() - t0

    arrays = random_inputs(inputs, seed)
    got = kernel(*arrays)
    want = ref.evaluate(fn, [a.copy() for a in arrays])
    got_list = [got] if len(outputs) == 1 else list(got or ())
    max_err, bound = 0.0, 0.0
    k = ref.reduction_length(fn)
    for g, w, spec in zip(got_list, want, outputs):
        max_err = max(max_err, float(np.max(np.abs(g - w), initial=0.0)))
        bound = max(bound, error_bound(k, spec.dtype, float(np.max(np.abs(w), initial=0.0))))

    fns = [lambda: kernel(*arrays)]
    if compare_numpy:  # numpy on the same work, in the inputs' own dtype
        fns.append(lambda: ref.evaluate(fn, arrays, dtype=arrays[0].dtype))
    seconds, *rest = median_times(fns, repeat)
    numpy_seconds = rest[0] if rest else None
    shapes = ", ".join("x".join(map(str, s.shape)) + f" {s.dtype}" for s in inputs)
    return Report(
        filename=filename, entry=kernel.entry, pipeline=pipeline, shapes=f"({shapes})",
        max_err=max_err, bound=bound, seconds=seconds, gflops=kernel.flops / seconds / 1e9,
        compile_seconds=compile_seconds, numpy_seconds=numpy_seconds,
    )

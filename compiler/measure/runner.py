"""Run a kernel on random inputs and check it against the numpy reference (`loom-run`).

What is checked: every result of a function on tensors, and for a function on memrefs
every argument the kernel writes (the reference writes its `outs` into copies of the
same inputs). A memref argument with a strided layout is made as a view into a larger
buffer of NaNs, so a read outside the view shows up as a NaN in the result and a write
outside it (before its first element too) as a changed padding element. Timing is
`timed_rounds`, loom-bench's too: a time budget per round, several rounds, the runs of
loom and numpy interleaved.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from compiler import numpy_reference as ref
from compiler.build import find_entry, load_module
from compiler.driver import compile
from compiler.jit.kernel import ArgSpec
from dialects.dtypes import dtype_named
from passes.support.target import host

if TYPE_CHECKING:
    from compiler.jit.engine import Timings


def error_bound(reduction: int, dtype: np.dtype, ref_max: float) -> float:
    """About 4*K*eps*max|ref|: the rounding a length-K f32/f64 reduction may show in any
    summation order; a bf16 result (summed in f32) one bf16 rounding more. 0 for integers:
    int8 products are summed exactly (quantize's result: `compare`)."""
    if dtype.kind in "iu":
        return 0.0
    if dtype == dtype_named("bfloat16"):
        return error_bound(reduction, np.dtype(np.float32), ref_max) + 2.0**-8 * ref_max
    return 4.0 * reduction * float(np.finfo(dtype).eps) * ref_max


def fill_value(dtype: np.dtype):
    """What `array_with_layout` fills the buffer around a view with: NaN, or an integer
    type's least value (a kernel that writes there is caught either way)."""
    return np.iinfo(dtype).min if dtype.kind in "iu" else np.nan


def untouched(values: np.ndarray) -> bool:
    """Whether `values` (`outside_view`'s) all still hold `fill_value`."""
    fill = fill_value(values.dtype)
    return bool(np.all(values == fill) if values.dtype.kind in "iu" else np.isnan(values.astype(np.float64)).all())


def array_with_layout(spec: ArgSpec, values: np.ndarray, fill: float | None = None) -> np.ndarray:
    """`values` in an array with `spec`'s layout: itself when that is C-contiguous, else a
    view with the spec's strides into a buffer (its `base`) that reaches from the pointer
    the kernel is passed (the layout's offset before element 0), the rest of it `fill`."""
    if spec.contiguous:  # (np.ascontiguousarray makes a 0-d array 1-d)
        return np.array(values, dtype=spec.dtype, order="C")
    itemsize = spec.dtype.itemsize
    reach = sum(max(0, (n - 1) * s) for n, s in zip(spec.shape, spec.strides)) if 0 not in spec.shape else 0
    base = np.full(spec.offset + reach // itemsize + 1, fill_value(spec.dtype) if fill is None else fill,
                   dtype=spec.dtype)
    view = np.ndarray(spec.shape, spec.dtype, buffer=base, offset=spec.offset * itemsize, strides=spec.strides)
    view[...] = values
    return view


def random_inputs(specs, seed: int) -> list[np.ndarray]:
    """Random values of each argument's kind, in its layout: standard normal floats (bf16
    rounded from them), i8/ui8 over their whole range, i32 in -1000..1000."""
    rng = np.random.default_rng(seed)
    return [array_with_layout(s, _random(rng, s.dtype, s.shape)) for s in specs]


def _random(rng: np.random.Generator, dtype: np.dtype, shape) -> np.ndarray:
    if dtype.itemsize == 1:
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max + 1, shape)
    if dtype.kind in "iu":
        return rng.integers(-1000, 1001, shape)
    values = rng.standard_normal(shape)
    return values.astype(np.float32) if dtype == dtype_named("bfloat16") else values


def outside_view(a: np.ndarray) -> np.ndarray:
    """The elements of the buffer under a view made by `array_with_layout` that the view
    does not show: the `fill` padding, the `offset` elements before the view's first
    element included (where a wrong base pointer would write). Empty for an array that
    is not such a view."""
    base = a.base
    if not isinstance(base, np.ndarray) or base.ndim != 1 or base.dtype != a.dtype or not base.flags.c_contiguous:
        return np.empty(0, a.dtype)
    shown = np.zeros(base.size, bool)
    if a.size:
        start = (a.ctypes.data - base.ctypes.data) // a.itemsize
        strides = tuple(s // a.itemsize for s in a.strides)
        np.ndarray(a.shape, bool, buffer=shown, offset=start, strides=strides)[...] = True
    return base[~shown]


def repeats_for(seconds: float, budget: float, at_most: int) -> int:
    """How many timed runs of `seconds` each fit `budget` (at least 3 for a median, at
    most `at_most`)."""
    return max(3, min(at_most, int(budget / max(seconds, 1e-6))))


#: seconds of sleep before each timed block when kernels run on several threads: OpenBLAS's
#: idle workers spin about 0.1 s after a call (libgomp's, Loom's, well under 1 ms)
SETTLE = 0.2


def median_times(fns, repeat: int, settle: float = 0.0) -> list[float]:
    """Median seconds of each function, the runs interleaved (a, b, a, b, ...) so that
    drift in clock or load hits all of them alike. With `settle` > 0 (functions that run
    on several threads), each function's runs come in a block after `settle` seconds of
    sleep instead: a thread pool spins for a while after a call (OpenBLAS's about 0.1 s,
    libgomp's well under 1 ms), and a block timed right after another library's would
    share its cores with those spinning threads."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(1 if settle else repeat):
        for f, ts in zip(fns, times):
            if settle:
                time.sleep(settle)
            for _ in range(repeat if settle else 1):
                t0 = time.perf_counter()
                f()
                ts.append(time.perf_counter() - t0)
    return [float(np.median(ts)) for ts in times]


@dataclass(frozen=True)
class Rounds:
    """What `timed_rounds` measured: `runs` timed runs of each function per round, and
    each round's median seconds of each function (`per_round[r][f]`)."""

    runs: int
    per_round: tuple[tuple[float, ...], ...]

    def median(self, f: int = 0) -> float:
        """Function `f`'s seconds: the median of its rounds' medians."""
        return float(np.median([t[f] for t in self.per_round]))

    def round_medians(self, f: int = 0) -> tuple[float, ...]:
        return tuple(t[f] for t in self.per_round)

    def ratios(self, f: int = 1) -> tuple[float, ...]:
        """Each round's speed of function 0 relative to `f` (its seconds over function 0's):
        loom/numpy with numpy as function 1."""
        return tuple(t[f] / t[0] for t in self.per_round)


def timed_rounds(fns, *, budget: float, at_most: int, rounds: int = 1, settle: float = 0.0) -> Rounds:
    """Time `fns` (their first is the kernel) as loom-run and loom-bench do: one run of the
    first, warm (the caller has run it once: the check), sizes the rounds: as many runs as
    fit `budget` seconds (`repeats_for`); then `rounds` rounds of that many runs each, the
    functions interleaved (`median_times`, in blocks after `settle` seconds of sleep for
    threaded functions). A shared machine's noise moves one round: the caller reports the
    median of the rounds, and their range."""
    t0 = time.perf_counter()
    fns[0]()
    runs = repeats_for(time.perf_counter() - t0, budget, at_most)
    return Rounds(runs, tuple(tuple(median_times(fns, runs, settle)) for _ in range(rounds)))


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
    checked: str = ""
    """What was compared: `2 results`, `argument %c`, ..."""
    runs: int = 0
    """Timed runs per round."""
    round_seconds: tuple[float, ...] = ()
    """Loom's median time in each round."""
    ratios: tuple[float, ...] = ()
    """loom/numpy speed in each round (with numpy)."""

    @property
    def ok(self) -> bool:
        return bool(self.max_err <= self.bound) and not self.notes

    def format(self) -> str:
        status = "OK" if self.ok else "MISMATCH"
        rounds = len(self.round_seconds)
        lines = [
            f"{self.filename}: @{self.entry} {self.shapes}  pipeline={self.pipeline}",
            f"  check    {status}: {self.checked}: max |loom - numpy(f64)| = {self.max_err:.3g}"
            f" (bound {self.bound:.3g})",
            *(f"  check    MISMATCH: {note}" for note in self.notes),
            f"  time     {self.seconds * 1e3:.3f} ms median  {self.gflops:.2f} GFLOP/s"
            f"  ({rounds} round{'s' * (rounds != 1)} of {self.runs} runs"
            + (f", round medians {min(self.round_seconds) * 1e3:.3f}-{max(self.round_seconds) * 1e3:.3f} ms"
               if rounds > 1 else "")
            + f"; compile {self.compile_seconds:.2f} s)",
        ]
        if self.numpy_seconds is not None:
            np_gflops = self.gflops * self.seconds / self.numpy_seconds if self.numpy_seconds else 0.0
            spread = f", rounds {min(self.ratios):.3f}-{max(self.ratios):.3f}x" if len(self.ratios) > 1 else ""
            ratio = float(np.median(self.ratios)) if self.ratios else self.numpy_seconds / self.seconds
            lines.append(
                f"  numpy    {self.numpy_seconds * 1e3:.3f} ms median  {np_gflops:.2f} GFLOP/s"
                f"  (loom/numpy speed {ratio:.3f}x median{spread})"
            )
        return "\n".join(lines)


def compare(got: list[np.ndarray], want: list[np.ndarray], reduction: int,
            rounds_to_integers: bool = False) -> tuple[float, float]:
    """Max |got - want| over the pairs (NaN where one is NaN and the other is not: a read
    out of bounds, say), and the largest error bound among them. `rounds_to_integers`: a
    float computation is quantized on the way, which may round one step apart from the
    float64 reference's (a bound of 1 for integer results)."""
    errors, bound = [0.0], 0.0
    for g, w in zip(got, want):
        g64 = g.astype(np.float64)
        w = np.asarray(w, np.float64)
        diff = np.where(np.isnan(g64) & np.isnan(w), 0.0, np.abs(g64 - w))
        errors.append(float(np.max(diff, initial=0.0)))
        magnitude = float(np.max(np.abs(w), initial=0.0, where=~np.isnan(w)))
        integer_step = float(rounds_to_integers and g.dtype.kind in "iu")
        bound = max(bound, error_bound(reduction, g.dtype, magnitude), integer_step)
    return (np.nan if any(np.isnan(errors)) else max(errors)), bound


def run_and_check(
    text: str,
    *,
    filename: str = "<source>",
    entry: str | None = None,
    pipeline: str = "naive",
    repeat: int = 100,
    budget: float = 0.5,
    rounds: int = 3,
    seed: int = 0,
    num_threads: int | None = None,
    compare_numpy: bool = False,
    timings: Timings | None = None,
) -> Report:
    """Compile, run once on random inputs and check against the float64 reference, then
    time: `rounds` rounds of at most `repeat` runs each, as many as fit `budget` seconds
    (at least 3), interleaved with numpy's runs when `compare_numpy` (`timed_rounds`; in
    blocks after a sleep when the kernel runs on threads, see `SETTLE`).
    With `timings`, the compile is timed stage by stage into it (see `compile`)."""
    module = load_module(text, filename)
    fn = find_entry(module, entry, option="--entry")
    t0 = time.perf_counter()
    kernel = compile(text, entry=fn.sym_name.data, pipeline=pipeline, num_threads=num_threads, filename=filename,
                     timings=timings)
    compile_seconds = time.perf_counter() - t0

    arrays = random_inputs(kernel.inputs, seed)
    # the reference writes outs into these (integers in int64, as numpy_reference.domain holds them)
    reference_args = [a.astype(np.int64 if a.dtype.kind in "iu" else np.float64) for a in arrays]
    got = kernel(*arrays)
    want = list(ref.evaluate(fn, reference_args))
    written = [i for i, s in enumerate(kernel.inputs) if s.in_place]
    got_list = ([got] if len(kernel.outputs) == 1 else list(got or ())) + [arrays[i] for i in written]
    want += [reference_args[i] for i in written]
    k = ref.reduction_length(fn)
    if "loom-winograd" in pipeline:  # (the source's convs may run by Winograd: its larger bound, F(4x4)'s)
        k *= ref.winograd_growth(4)
    max_err, bound = compare(got_list, want, k, ref.rounds_to_integers(fn))
    notes = [f"the kernel wrote outside the view of argument {kernel.inputs[i].name}"
             for i in written if not untouched(outside_view(arrays[i]))]
    checked = ", ".join([*(f"result #{i}" for i in range(len(kernel.outputs))),
                         *(f"argument {kernel.inputs[i].name}" for i in written)])
    checked = checked or "nothing to compare (no results, no argument written)"

    fns = [lambda: kernel(*arrays)]
    if compare_numpy:  # numpy on the same work, in the inputs' own dtype
        fns.append(lambda: ref.evaluate(fn, arrays, dtype=arrays[0].dtype))
    threads = num_threads or host().threads
    settle = SETTLE if compare_numpy and threads > 1 and "GOMP_parallel" in kernel.llvm_ir else 0.0
    timing = timed_rounds(fns, budget=budget, at_most=repeat, rounds=rounds, settle=settle)
    seconds = timing.median()
    shapes = ", ".join(("x".join(map(str, s.shape)) or "0-d") + f" {s.dtype}" for s in kernel.inputs)
    return Report(
        filename=filename, entry=kernel.entry, pipeline=pipeline, shapes=f"({shapes})",
        max_err=max_err, bound=bound, seconds=seconds, gflops=kernel.flops / seconds / 1e9,
        compile_seconds=compile_seconds, numpy_seconds=timing.median(1) if compare_numpy else None, notes=notes,
        checked=checked, runs=timing.runs, round_seconds=timing.round_medians(),
        ratios=timing.ratios() if compare_numpy else (),
    )

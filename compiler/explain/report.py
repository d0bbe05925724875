"""The report `compiler.explain` makes on one kernel: the loop nests stage by stage
(compiler/explain/loop_nest.py), the schedule's decisions (compiler/explain/decisions.py),
the data movement the cost model estimates per memory level
(passes/analysis/cost_model.py, `MatmulPlan.traffic`), and the measured GFLOP/s against
the machine's FMA peak on as many threads (compiler/measure/peak.py).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from compiler.driver import compile
from compiler.explain.decisions import OpDecisions, PlannedMatmul, schedule_decisions
from compiler.explain.loop_nest import loop_nest
from compiler.measure.peak import peak_gflops
from compiler.measure.runner import random_inputs, timed_rounds
from passes.support.diagnostics import LoomError
from passes.support.target import host
from passes.support.units import format_bytes

if TYPE_CHECKING:
    from compiler.jit.kernel import Kernel

#: the stages a report shows by default; "lowered" (after loom-lower-affine) can be added
STAGES = ("input", "affine", "schedule")
_STAGE_PASSES = {"input": "input", "affine": "convert-loom-to-affine", "lowered": "loom-lower-affine"}
#: the passes of the lowering to affine loops and from them: any other pass between the two
#: is a schedule pass
_LOWERING = ("loom-bufferize", "convert-loom-to-affine", "loom-outline")


@dataclass(frozen=True)
class Measurement:
    """The kernel's measured speed on the arrays given, and the machine's peak."""

    seconds: float  # median of `calls` calls
    calls: int
    flops: int
    threads: int  # the threads its parallel loops ran on (1: it has none)
    dtype: str  # "f32" or "f64"
    peak: float | None  # GFLOP/s: the FMA peak on `threads` threads (None: not measured)
    note: str = ""

    @property
    def gflops(self) -> float:
        return self.flops / self.seconds / 1e9 if self.seconds > 0 else 0.0

    @property
    def share_of_peak(self) -> float | None:
        return self.gflops / self.peak if self.peak else None


@dataclass
class Report:
    """What `explain` found out about one kernel; `str(report)` renders it."""

    entry: str
    filename: str
    pipeline: str
    target: str
    signature: str
    stages: list[tuple[str, str]]  # (title, loop nest)
    schedule_note: str
    decisions: list[OpDecisions]
    plans: list[PlannedMatmul]
    measurement: Measurement | None
    remarks: list[str] = field(default_factory=list)
    kernel: Kernel | None = field(default=None, repr=False)

    def traffic_lines(self) -> list[str]:
        """The cost model's data movement per memory level, per matmul plan and in all."""
        if not self.plans:
            return ["no matmul was planned by the cost model: nothing estimated (elementwise nests and copies read "
                    "and write each element once)"]
        levels = list(self.plans[0].plan.traffic())
        rows = [["", *levels]]
        totals = dict.fromkeys(levels, 0.0)
        for planned in self.plans:
            p = planned.plan
            traffic = p.traffic()
            fma = p.m * p.n * p.k
            cells = [planned.name]
            for level in levels:
                elements = traffic.get(level, 0.0)
                totals[level] += elements * p.element_bytes
                per = f", {elements / fma:.3g}/fma" if fma else ""
                cells.append(f"{_count(elements)} ({format_bytes(elements * p.element_bytes)}{per})")
            rows.append(cells)
        if len(self.plans) > 1:
            rows.append(["all", *(format_bytes(totals[level]) for level in levels)])
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = [f"{r[0]:<{widths[0]}}" + "".join(f"  {c:>{w}}" for c, w in zip(r[1:], widths[1:])) for r in rows]
        lines.append("(elements of the matmul's type, then bytes and elements per multiply-add; the elementwise "
                     "nests and the copies are not modelled)")
        return lines

    def __str__(self) -> str:
        threads = self.measurement.threads if self.measurement else None
        head = f"explain @{self.entry} ({self.filename}), pipeline {self.pipeline}"
        out = [head + (f", {threads} thread{'s' * (threads != 1)}" if threads else ""),
               f"target: {self.target}", f"arrays: {self.signature}", ""]
        for title, text in self.stages:
            out += [f"== loop nest {title} ==", text, ""]
        if self.schedule_note:
            out += [self.schedule_note, ""]
        out.append("== schedule decisions ==")
        if not self.decisions:
            out.append("none: no schedule pass ran, or none said anything")
        for group in self.decisions:
            where = group.location or "the whole module"
            out.append(f"{where}" + (f": {group.source}" if group.source else ""))
            for d in group.decisions:
                first = f"  {d.label:<15} "
                out += textwrap.wrap(d.text, 118, initial_indent=first, subsequent_indent=" " * len(first),
                                     break_on_hyphens=False) or [first]
                for detail in d.details:
                    out += _wrap(detail, 118, " " * (len(first) + 2), " " * (len(first) + 4))
        out += ["", "== estimated data movement (cost model) ==", *self.traffic_lines(), "", "== measured =="]
        m = self.measurement
        if m is None:
            out.append("not measured")
        else:
            how = f"the median of {m.calls} calls" if m.calls else "the median measured above"
            out.append(f"{m.seconds * 1e3:.4g} ms, {how}, on {m.threads} thread" + "s" * (m.threads != 1))
            if not m.flops:
                out.append("no floating-point work: no GFLOP/s")
            elif m.peak:
                out.append(f"{m.gflops:.2f} GFLOP/s = {m.share_of_peak:.0%} of the machine's {m.dtype} FMA peak on "
                           f"{m.threads} thread{'s' * (m.threads != 1)} ({m.peak:.1f} GFLOP/s, measured once per "
                           "machine: compiler/measure/peak.py)")
            else:
                out.append(f"{m.gflops:.2f} GFLOP/s")
            if m.note:
                out.append(m.note)
        return "\n".join(out)


def _wrap(text: str, width: int, indent: str, more: str) -> list[str]:
    """`text` in lines of at most `width` (where its words allow): a pass list breaks
    between its passes, anything else between words."""
    if not text.startswith("pass list: "):
        return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=more, break_on_hyphens=False)
    lines, line = [], indent + "pass list: "
    items = _split_top(text.removeprefix("pass list: "))
    for i, item in enumerate(items):
        item += "," if i < len(items) - 1 else ""
        if len(line) + len(item) > width and line.strip() != "pass list:":
            lines.append(line.rstrip())
            line = more
        line += item
    return [*lines, line]


def _split_top(text: str) -> list[str]:
    """`a{x=1,2},b` -> [`a{x=1,2}`, `b`]: split at the commas outside braces."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "{") - (ch == "}")
        if ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    items.append(text[start:].strip())
    return items


def _count(n: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return f"{n:.3g}"


def _stage_list(kernel: Kernel, wanted: Sequence[str]) -> tuple[list[tuple[str, str]], str]:
    """The (title, loop nest) of each stage wanted, and a note when there is no schedule."""
    names = list(kernel.stages)
    if "loom-lower-affine" in names:
        lowering = names.index("loom-lower-affine")
    else:
        lowering = len(names)
    schedule = [n for n in names[:lowering] if n != "input" and n.split("#")[0] not in _LOWERING]
    out: list[tuple[str, str]] = []
    note = ""
    for stage in wanted:
        if stage not in (*STAGES, "lowered"):
            raise ValueError(f"unknown stage {stage!r}: the stages are {', '.join((*STAGES, 'lowered'))}")
        if stage == "schedule":
            if not schedule:
                note = (f"no schedule: the pipeline '{kernel.pipeline}' runs no schedule pass, so the loops above "
                        "run as written (pipeline='default' schedules them for this machine)")
                continue
            last = schedule[-1]
            passes = ", ".join(n.split("#")[0] for n in schedule)
            title = f"after {last} (the schedule)" if len(schedule) == 1 else f"after the schedule ({passes})"
            out.append((title, loop_nest(kernel.stages[last])))
            continue
        name = _STAGE_PASSES[stage]
        if name in kernel.stages:
            what = {"input": "input (the loom ops)", "affine": "after convert-loom-to-affine (the textbook loops)",
                    "lowered": "after loom-lower-affine (scf loops)"}[stage]
            out.append((what, loop_nest(kernel.stages[name])))
    return out, note


def _signature(kernel: Kernel) -> str:
    ins = ", ".join(s.short() for s in kernel.inputs)
    outs = ", ".join(s.short() for s in kernel.outputs)
    return f"{ins or 'none'}" + (f" -> {outs}" if outs else "")


def measure(kernel: Kernel, arrays: Sequence[np.ndarray], *, budget: float = 0.5) -> Measurement:
    """The kernel's median time on `arrays` (as many calls as fit `budget` seconds, at
    least 3), with the threads it runs on and the machine's peak on as many."""
    def call():
        kernel(*arrays)

    call()  # the arrays are checked here, before any timing
    timing = timed_rounds([call], budget=budget, at_most=1000)
    return _measurement(kernel, timing.median(), timing.runs)


def _measurement(kernel: Kernel, seconds: float, calls: int) -> Measurement:
    """`seconds` (the median of `calls` calls; 0 calls: a time measured elsewhere) set
    against the FMA peak on the threads the kernel runs on: its parallel loops' count, or
    1 when it has none."""
    parallel = "GOMP_parallel" in kernel.llvm_ir
    threads = (kernel.num_threads or host().threads) if parallel else 1
    spec = (kernel.outputs or kernel.inputs or [None])[0]
    dtype = "f64" if spec is not None and spec.dtype == np.float64 else "f32"
    note = "" if parallel else "(no loop of this kernel runs on threads)"
    peak = None
    try:
        peak = peak_gflops(dtype, threads)
    except LoomError as e:
        note = f"the FMA peak was not measured: {e.message}"
    return Measurement(seconds, calls, kernel.flops, threads, dtype, peak, note)


def explain_source(
    source: str | ModuleOp,
    *arrays: np.ndarray,
    entry: str | None = None,
    pipeline: str = "default",
    num_threads: int | None = None,
    filename: str = "<source>",
    stages: Sequence[str] = STAGES,
    measure_time: bool = True,
    seconds: float | None = None,
    budget: float = 0.5,
    seed: int = 0,
) -> Report:
    """Compile `source` (loom-dialect MLIR text or a module) as `compile()` would, with
    its remarks and the IR after each pass, and report on it (see the module's
    docstring). `arrays` are the kernel's arguments for the measurement (standard normal
    ones, seeded by `seed`, when none are given); `measure_time=False` leaves it out, and
    `seconds` gives a time measured elsewhere (loom-run's). `stages` picks the loop
    nests shown: `input`, `affine`, `schedule`, `lowered`."""
    # (not from a cache: the disk cache keeps the remarks' text alone, and the decisions
    # are read from their payloads, which only a compile that runs the passes has)
    kernel = compile(source, entry=entry, pipeline=pipeline, num_threads=num_threads, remarks=True, stages=True,
                     filename=filename, cache=False)
    if "input" not in kernel.stages:
        raise LoomError("the kernel was compiled without its stages (compile(stages=True)): nothing to explain")
    shown, note = _stage_list(kernel, stages)
    text = source if isinstance(source, str) else ""
    decisions, plans = schedule_decisions(kernel.remark_records, host(), source=text, filename=filename)
    measurement = None
    if seconds is not None or measure_time:
        if seconds is not None:
            measurement = _measurement(kernel, seconds, 0)
        else:
            inputs = list(arrays) if arrays else random_inputs(kernel.inputs, seed)
            measurement = measure(kernel, inputs, budget=budget)
    return Report(kernel.entry, filename, pipeline, host().describe(), _signature(kernel), shown, note, decisions,
                  plans, measurement, list(kernel.remarks), kernel)


def explain_function(fn, *args, **options) -> Report:
    """The report on a `@compiler.jit` function called with `args` (its arguments):
    `options` go to `explain_source`, the function's own pipeline and threads by default."""
    spec = fn.specialize(*args)
    options.setdefault("pipeline", fn.pipeline)
    options.setdefault("num_threads", fn.num_threads)
    options.setdefault("filename", f"<loom.jit {getattr(fn.fn, '__qualname__', 'function')}>")
    return explain_source(spec.source, *spec.inputs(args), **options)

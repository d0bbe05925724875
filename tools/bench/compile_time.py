"""`loom-bench --compile`: compile time, stage by stage (CPU seconds: parse and verify,
set-up, each pass, LLVM emission, LLVM's O3, machine code), for example kernels, for
chains of elementwise ops and for the default pipeline's matmul in a fresh process, cold
and warm; then that matmul's compile() and one call in fresh processes sharing a disk
cache, and from those, start-up against its targets (`import compiler`, and the kernel
served from the disk cache end to end). Every kernel timed is the kernel checked against
the float64 reference."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from compiler.jit.engine import Timings
from compiler.measure.runner import run_and_check
from passes.support.diagnostics import LoomError
from tools.bench.common import Shape, bench_machine, cell, compile_fresh, matmul_source, shape_label

#: `loom-bench --compile`: the chains' lengths (elementwise ops in a row)
CHAIN_LENGTHS = [1000]
#: start-up targets (issue 26), wall seconds in a fresh process: `import compiler`, and a
#: kernel served from the disk cache end to end (`import compiler`, compile(), one call)
IMPORT_TARGET = 0.2
SERVED_TARGET = 0.3


def chain_source(n: int, shape: tuple[int, ...] = (64, 64), dtype: str = "f32") -> str:
    """`@chain`: n elementwise adds in a row, %x(k) = %x(k-1) + %b, the last one returned
    (how a network's elementwise tail grows: one loop nest per op)."""
    t = f"tensor<{'x'.join(map(str, shape))}x{dtype}>"
    lines = [f"func.func @chain(%x0: {t}, %b: {t}) -> {t} {{"]
    lines += [f"  %x{k} = loom.add %x{k - 1}, %b : ({t}, {t}) -> {t}" for k in range(1, n + 1)]
    lines.append(f"  func.return %x{n} : {t}\n}}\n")
    return "\n".join(lines)


@dataclass
class CompileRow:
    """One kernel's compile time by stage, and its compile() checked against numpy."""

    name: str
    pipeline: str
    stages: Timings
    compile_seconds: float  # wall seconds of compile() itself, for the kernel checked
    max_err: float
    bound: float

    @property
    def cpu(self) -> float:
        return sum(c for c, _ in self.stages.values())

    @property
    def wall(self) -> float:
        return sum(w for _, w in self.stages.values())

    @property
    def ok(self) -> bool:
        return bool(self.max_err <= self.bound)


def checked_compile(name: str, source: str, pipeline: str) -> CompileRow:
    """Compile `source` once, timed stage by stage (`compile(timings=...)`: a real
    compile, never a cache hit), and check the kernel against the float64 reference on
    random inputs."""
    timings: Timings = {}
    report = run_and_check(source, filename=name, pipeline=pipeline, repeat=3, budget=1e-3, rounds=1,
                           timings=timings)
    return CompileRow(name, pipeline, timings, report.compile_seconds, report.max_err, report.bound)


def _in_fresh_process(probe: str, argv: list[str], what: str, environment: dict[str, str] | None = None) -> dict:
    """Run the Python program `probe` with `argv` in a fresh interpreter; the JSON object on
    its last line of output. A LoomError names `what` with the error the probe reports
    ({"error": ...}), or with the last line of its traceback when it dies."""
    done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, env=environment,
                          check=False)
    if done.returncode != 0:  # a crash or a bug: its traceback's last line
        last = next((line for line in reversed(done.stderr.splitlines()) if line.strip()), "")
        raise LoomError(f"{what}, failed (exit status {done.returncode}): {last.strip()}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if "error" in result:
        raise LoomError(f"{what}: {result['error']}")
    return result


#: run in a fresh process by `cold_compile`: the import of Loom, then the matmul (its source
#: text the argument: nothing of Loom's imported before) compiled cold (the first compile:
#: lazy imports, LLVM's set-up) and warm, the warm one checked
_COLD_PROBE = """
import json, sys, time
cpu, wall = time.process_time(), time.perf_counter()
import compiler
imported = (time.process_time() - cpu, time.perf_counter() - wall)
source = sys.argv[1]
cold = {}
try:
    compiler.compile(source, pipeline="default", timings=cold)
    from tools.bench.compile_time import checked_compile
    warm = checked_compile("matmul", source, "default")
except (ValueError, TypeError, MemoryError) as e:  # a matmul too big for memory, say
    print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
    sys.exit(0)
print(json.dumps({"import": imported, "cold": cold, "warm": warm.stages, "compile_seconds": warm.compile_seconds,
                  "max_err": warm.max_err, "bound": warm.bound}))
"""


def cold_compile(shape: Shape = (1024, 1024, 1024)) -> dict:
    """In a fresh Python process: the CPU and wall seconds of `import compiler` ("import"),
    and the stages of the default pipeline's matmul of `shape` compiled first ("cold")
    and again ("warm"); the warm kernel's compile() seconds and check ("compile_seconds",
    "max_err", "bound")."""
    result = _in_fresh_process(_COLD_PROBE, [matmul_source(*shape)],
                               f"the matmul {shape_label(shape)}, compiled in a fresh process")
    for when in ("cold", "warm"):
        result[when] = {stage: tuple(t) for stage, t in result[when].items()}
    result["import"] = tuple(result["import"])
    return result


#: run by `disk_hit` in fresh processes sharing one cache folder, as a program that uses a
#: kernel does: `import compiler`, compile() of the matmul (its source text the first
#: argument; a miss that fills the disk cache in the first process, a hit in the later
#: ones), one call; each timed (wall seconds), nothing else of Loom's imported before the
#: call returns, the result checked after
_DISK_PROBE = """
import json, sys, time
wall = time.perf_counter()
import compiler
imported = time.perf_counter() - wall
wall = time.perf_counter()
kernel = compiler.compile(sys.argv[1], pipeline="default")
compiled = time.perf_counter() - wall
import numpy as np
m, n, k = json.loads(sys.argv[2])
rng = np.random.default_rng(0)
a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
wall = time.perf_counter()
c = kernel(a, b)
called = time.perf_counter() - wall
from compiler.jit.disk_cache import disk_cache
from compiler.measure.runner import error_bound
want = a.astype(np.float64) @ b
ok = float(np.abs(c - want).max()) <= error_bound(k, np.dtype(np.float32), float(np.abs(want).max()))
print(json.dumps({"import": imported, "compile": compiled, "call": called, "stats": dict(disk_cache.stats),
                  "ok": ok}))
"""


def disk_hit(shape: Shape = (1024, 1024, 1024), hits: int = 5) -> dict:
    """compile() of the default pipeline's matmul of `shape` in a fresh process with an
    empty disk cache ("miss": it compiles and stores), then in `hits` more processes that
    find it there; the wall seconds of `import compiler`, of compile() and of one call in
    each, and whether every kernel checked against numpy."""
    with tempfile.TemporaryDirectory(prefix="loom-bench-cache-") as folder:
        environment = {**os.environ, "LOOM_CACHE_DIR": folder}
        environment.pop("LOOM_CACHE_MAX_BYTES", None)
        argv = [matmul_source(*shape), json.dumps(list(shape))]
        runs = [_in_fresh_process(_DISK_PROBE, argv, "the disk cache probe", environment) for _ in range(1 + hits)]
    return {"shape": list(shape), "miss": runs[0], "hits": runs[1:],
            "ok": all(r["ok"] for r in runs) and all(r["stats"].get("hit") for r in runs[1:])}


def _end_to_end(run: dict) -> float:
    """A disk cache probe's wall seconds from `import compiler` to its call's return."""
    return run["import"] + run["compile"] + run["call"]


def markdown_disk_hit(result: dict) -> str:
    """One line per process: the wall milliseconds of import, compile() and one call, and
    what the cache did."""
    hits = sorted(r["compile"] for r in result["hits"])
    out = [f"disk cache, matmul {shape_label(result['shape'])} (default pipeline), each a fresh process:",
           "| process | import compiler (ms) | compile() (ms) | one call (ms) | end to end (ms) | disk cache |",
           "|---|---:|---:|---:|---:|---|"]
    for i, r in enumerate([result["miss"], *result["hits"]]):
        what = ", ".join(f"{k} {v}" for k, v in sorted(r["stats"].items()))
        out.append(f"| {'first' if i == 0 else f'then {i}'} | {r['import'] * 1e3:.1f} | {r['compile'] * 1e3:.1f} | "
                   f"{r['call'] * 1e3:.1f} | {_end_to_end(r) * 1e3:.1f} | {what}{'' if r['ok'] else ', MISMATCH'} |")
    out.append(f"\na hit: median {hits[len(hits) // 2] * 1e3:.1f} ms, best {hits[0] * 1e3:.1f} ms beyond import")
    return "\n".join(out)


def startup(result: dict) -> dict:
    """Start-up, from the processes of `disk_hit` that found the kernel on disk: the median
    wall seconds of `import compiler`, and of the kernel served end to end (import,
    compile() from the disk cache, one call), each with its target."""
    hits = result["hits"]
    return {"runs": len(hits), "kernel": f"matmul {shape_label(result['shape'])}",
            "import": statistics.median(r["import"] for r in hits), "import_target": IMPORT_TARGET,
            "served": statistics.median(_end_to_end(r) for r in hits), "served_target": SERVED_TARGET}


def markdown_startup(figures: dict) -> str:
    """The start-up rows: each median beside its target."""
    return "\n".join([
        f"start-up, wall seconds in a fresh process (median of {figures['runs']}):",
        "| start-up | seconds | target |", "|---|---:|---:|",
        f"| import compiler | {figures['import']:.3f} | ≤ {figures['import_target']} |",
        f"| {figures['kernel']} from the disk cache, end to end (import, compile(), one call) "
        f"| {figures['served']:.3f} | ≤ {figures['served_target']} |",
    ])


def run_compile(
    examples: Sequence[tuple[str, str]] = (), *, chains: Sequence[int] = CHAIN_LENGTHS, pipeline: str = "default",
    matmul: Shape | None = (1024, 1024, 1024), on_row: Callable[[CompileRow], None] | None = None,
) -> tuple[list[CompileRow], tuple[float, float] | None]:
    """Compile time by stage: each example (name, source) and each chain of `chains` ops
    with `pipeline`, in this process after a warm-up compile; then, in a fresh process,
    the default pipeline's matmul of shape `matmul` cold and warm. Every kernel is
    checked (the one compile timed). Returns the rows and the (CPU, wall) seconds of
    `import compiler` in the fresh process (None without `matmul`)."""
    compile_fresh(chain_source(2), pipeline)  # lazy imports and LLVM's set-up: not the rows' cost
    rows: list[CompileRow] = []

    def add(row: CompileRow) -> None:
        rows.append(row)
        if on_row:
            on_row(row)

    for name, source in examples:
        add(checked_compile(name, source, pipeline))
    for n in chains:
        add(checked_compile(f"chain of {n} adds", chain_source(n), pipeline))
    if matmul is None:
        return rows, None
    probe = cold_compile(matmul)
    label = f"matmul {shape_label(matmul)}"
    for when in ("cold", "warm"):
        add(CompileRow(f"{label} ({when})", "default", probe[when], probe["compile_seconds"], probe["max_err"],
                       probe["bound"]))
    return rows, probe["import"]


def _stage_names(rows: list[CompileRow]) -> list[str]:
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row.stages))
    return list(names)


def markdown_compile(rows: list[CompileRow], imported: tuple[float, float] | None = None) -> str:
    """Stages down, kernels across: CPU seconds (the wall seconds of the total too: on a
    shared machine they can differ)."""
    out = ["| stage (CPU s) | " + " | ".join(r.name for r in rows) + " |",
           "|---|" + "---:|" * len(rows)]
    for stage in _stage_names(rows):
        out.append(f"| {stage} | " + " | ".join(cell(r.stages[stage][0], ".3f") if stage in r.stages else "-"
                                               for r in rows) + " |")
    out.append("| **total CPU** | " + " | ".join(f"**{r.cpu:.3f}**" for r in rows) + " |")
    out.append("| total wall | " + " | ".join(f"{r.wall:.3f}" for r in rows) + " |")
    out.append("| compile() wall | " + " | ".join(f"{r.compile_seconds:.3f}" for r in rows) + " |")
    out.append("| check | " + " | ".join("ok" if r.ok else "MISMATCH" for r in rows) + " |")
    if imported is not None:
        out.append(f"\nimport compiler (a fresh process): {imported[1]:.3f} s wall, {imported[0]:.3f} s CPU")
    return "\n".join(out)


def compile_json(rows: list[CompileRow], imported: tuple[float, float] | None = None) -> dict:
    return {
        "import": None if imported is None else {"cpu": imported[0], "wall": imported[1]},
        "rows": [{"name": r.name, "pipeline": r.pipeline,
                  "stages": {s: {"cpu": c, "wall": w} for s, (c, w) in r.stages.items()},
                  "cpu": r.cpu, "wall": r.wall, "compile_seconds": r.compile_seconds,
                  "max_err": r.max_err, "bound": r.bound, "ok": r.ok} for r in rows],
    }


def compile_mode(args, blas: str) -> int:
    """`loom-bench --compile`: the table, and the disk cache's when a matmul is timed."""
    rows, imported = run_compile(args.examples, chains=args.chain, pipeline=args.pipeline, matmul=args.matmul,
                                 on_row=None if args.json else _progress_compile)
    disk = disk_hit(args.matmul) if args.matmul else None
    figures = startup(disk) if disk else None
    machine = bench_machine()
    if args.json:
        print(json.dumps({"machine": machine, "blas": blas, "pipeline": args.pipeline,
                          **compile_json(rows, imported), "disk_cache": disk, "startup": figures}, indent=1))
    else:
        print(f"machine: {machine}\npipeline: {args.pipeline} (the matmul's: default)\n")
        print(markdown_compile(rows, imported))
        if disk:
            print(f"\n{markdown_disk_hit(disk)}\n\n{markdown_startup(figures)}")
    return 0 if all(r.ok for r in rows) and (disk is None or disk["ok"]) else 1


def _progress_compile(row) -> None:
    slowest = max(row.stages.items(), key=lambda kv: kv[1][0])
    print(f"  {row.name:<40} {row.cpu:7.3f} s CPU  {row.wall:7.3f} s wall  (most: {slowest[0]} "
          f"{slowest[1][0]:.3f} s){'' if row.ok else '  MISMATCH'}", file=sys.stderr)

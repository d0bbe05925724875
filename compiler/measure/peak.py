"""The machine's FMA peak: the GFLOP/s its vector FMA units reach when nothing else limits
them, measured once per machine and kept on disk, so that a kernel's speed can be quoted
as a share of it (`compiler.explain`, `loom-bench`); and the peaks of bf16 and int8
products on the instruction the machine has for them (`dot_path`: `vdpbf16ps` and
`vpdpbusd` where it has AVX512-BF16 and VNNI, else FMAs on bf16 widened to f32 and
`vpmaddwd` on int8 widened to i16), counted in operations (a multiply-add is two).

    peak_gflops(dtype, threads=1) -> float   cached: measured on first use per machine
    measure_peak(dtype, threads=1) -> float  a fresh measurement (best of `runs`)
    peak_module(dtype) -> str                the LLVM IR it runs

The measurement is a loop of independent vector FMA chains in LLVM IR, compiled like any
kernel (compiler/jit/engine.py: O3 for the host CPU): `chains` accumulators of the host's
vector width, each `acc = fma(acc, x, y)`, so that an FMA waits only for its own chain's
previous one. Two FMA ports of 4-5 cycles' latency need 8-10 FMAs in flight; 16 chains
(12 where there are only 16 vector registers: the accumulators, x and y must all stay in
registers) cover that with a margin. x is just below 1 and y positive, so the chains
converge to normal numbers (no denormals, no overflow). The dot-product chains are alike,
`acc = vdpbf16ps(acc, x, y)` and `acc = vpdpbusd(acc, x, y)` (i32 sums wrap, harmlessly);
`vpmaddwd` takes the chain's accumulator as its i16 pairs, or LLVM would hoist it. Each thread runs the same loop
(libgomp's `GOMP_parallel`, as the kernels' parallel loops do); the time is the wall time
of the whole team, the flops `2 x lanes x chains x iterations x threads`, the result the
best of a few runs (the peak is what the machine can do: a run it shares with other work
is slower, never faster).

The cache is `peak.json` in `compiler.jit.disk_cache.cache_dir()`, one entry per machine: the CPU
name and features LLVM reports (what the JIT compiles for) and the version of this
measurement; in it, one figure per (dtype, threads), each measured when first asked for.
An unreadable or malformed file is ignored and rewritten; writes go through a temporary
file and a rename, so a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from passes.support.diagnostics import LoomError
from passes.support.target import Target, machine, openmp_runtime

#: bump when the measurement changes: figures measured another way are not reused
MEASUREMENT_VERSION = 1
#: loop iterations per run: about 5 GFLOP for f32 on AVX-512 (tens of milliseconds)
ITERATIONS = 5_000_000
#: runs per measurement; the best counts
RUNS = 5
CACHE_FILE = "peak.json"

_DTYPES = {"f32": np.dtype(np.float32), "f64": np.dtype(np.float64)}
#: the low-precision products: their peak is the dot-product instruction's (`dot_path`)
LOW_PRECISION = ("bf16", "int8")
DTYPES = (*_DTYPES, *LOW_PRECISION)
_lock = threading.Lock()
_measured: dict[tuple[str, str, int], float] = {}  # (machine key, dtype, threads) -> GFLOP/s


def dtype_name(dtype) -> str:
    """`f32`, `f64`, `bf16` or `int8` for anything numpy reads as float32, float64,
    bfloat16 (ml_dtypes) or int8/uint8 (the names too); a ValueError for anything else."""
    if isinstance(dtype, str) and dtype in DTYPES:
        return dtype
    try:
        d = np.dtype(dtype) if dtype is not None else None  # (numpy reads None as float64)
    except TypeError:
        d = None
    for name, known in _DTYPES.items():
        if d is not None and d == known:
            return name
    if d is not None and d.name == "bfloat16":
        return "bf16"
    if d is not None and d in (np.dtype(np.int8), np.dtype(np.uint8)):
        return "int8"
    raise ValueError(f"the peak is measured for float32, float64, bfloat16 and int8, got {dtype!r}")


def _check_threads(threads: int) -> int:
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    return threads


@dataclass(frozen=True)
class DotPath:
    """How a multiply-add of `dtype` runs on a target: the instruction the measurement (and
    a kernel) uses and the operations (a multiply and an add each count one) it does per
    lane of its 32- or 64-bit accumulator."""

    dtype: str
    instruction: str
    ops_per_lane: int
    why: str = ""  # where the target lacks the dot-product instruction: what runs instead

    def describe(self) -> str:
        return f"{self.instruction} ({self.why})" if self.why else self.instruction


def dot_path(dtype, target: Target | None = None) -> DotPath:
    """The instruction `dtype`'s products run on: FMAs for f32/f64; `vdpbf16ps` (two bf16
    products per f32 lane) where the target has AVX512-BF16, else FMAs on values widened to
    f32; `vpdpbusd` (four u8 x s8 products per i32 lane) where it has VNNI, else `vpmaddwd`
    (two i16 products per i32 lane, on values widened to i16) and an add."""
    name, target = dtype_name(dtype), target or machine()
    if name in _DTYPES:
        return DotPath(name, f"vfmadd{'ps' if name == 'f32' else 'pd'}" if target.fma else "vmul + vadd", 2)
    if name == "bf16":
        if target.bf16_dot:
            return DotPath(name, "vdpbf16ps", 4)
        return DotPath(name, "vfmaddps" if target.fma else "vmul + vadd", 2,
                       "no AVX512-BF16: bf16 widened to f32")
    if target.int8_dot:
        return DotPath(name, "vpdpbusd", 8)
    return DotPath(name, "vpmaddwd + vpaddd", 4, "no VNNI: int8 widened to i16")


def vector_shape(dtype, target: Target | None = None) -> tuple[int, int]:
    """(lanes, chains) of the measurement on this machine for `dtype`: the lanes of one
    vector register of accumulators (f32 for bf16, i32 for int8), and as many chains as keep
    two FMA ports busy that the registers hold beside x and y."""
    target = target or machine()
    size = 8 if dtype_name(dtype) == "f64" else 4
    lanes = target.vector_bits // (8 * size)
    chains = max(4, min(16, target.vector_registers - 4))
    return lanes, chains


def _chain_step(name: str, target: Target, lanes: int) -> tuple[list[str], list[str], str]:
    """(declarations, the lines of chain `{c}`'s step, the operands' type): `%a{c}.next`
    from `%a{c}` and the splatted operands `%vx`, `%vy` (bf16 pairs, u8/s8 quads or i16
    pairs for the dot products, else the accumulators' type)."""
    path = dot_path(name, target)
    bits = target.vector_bits
    if path.instruction == "vdpbf16ps":
        acc, half = f"<{lanes} x float>", f"<{2 * lanes} x bfloat>"
        fn = f"llvm.x86.avx512bf16.dpbf16ps.{bits}"
        return ([f"declare {acc} @{fn}({acc}, {half}, {half})"],
                [f"  %a{{c}}.next = call {acc} @{fn}({acc} %a{{c}}, {half} %vx, {half} %vy)"], half)
    if path.instruction == "vpdpbusd":
        acc, quad = f"<{lanes} x i32>", f"<{4 * lanes} x i8>"
        fn = f"llvm.x86.avx512.vpdpbusd.{bits}"
        return ([f"declare {acc} @{fn}({acc}, {quad}, {quad})"],
                [f"  %a{{c}}.next = call {acc} @{fn}({acc} %a{{c}}, {quad} %vx, {quad} %vy)"], quad)
    if path.instruction == "vpmaddwd + vpaddd":
        # the product reads the chain's accumulator (as i16 pairs): LLVM cannot hoist it
        acc, pair = f"<{lanes} x i32>", f"<{2 * lanes} x i16>"
        fn = {128: "llvm.x86.sse2.pmadd.wd", 256: "llvm.x86.avx2.pmadd.wd"}.get(bits, "llvm.x86.avx512.pmaddw.d.512")
        return ([f"declare {acc} @{fn}({pair}, {pair})"],
                [f"  %w{{c}} = bitcast {acc} %a{{c}} to {pair}",
                 f"  %p{{c}} = call {acc} @{fn}({pair} %w{{c}}, {pair} %vy)",
                 f"  %a{{c}}.next = add {acc} %a{{c}}, %p{{c}}"], pair)
    scalar = "double" if name == "f64" else "float"
    v, suffix = f"<{lanes} x {scalar}>", "f64" if name == "f64" else "f32"
    if target.fma:
        fma = f"llvm.fma.v{lanes}{suffix}"
        return ([f"declare {v} @{fma}({v}, {v}, {v})"],
                [f"  %a{{c}}.next = call {v} @{fma}({v} %a{{c}}, {v} %vx, {v} %vy)"], v)
    # no FMA unit: a multiply and an add (no fast-math flags: LLVM keeps them apart)
    return [], [f"  %m{{c}} = fmul {v} %a{{c}}, %vx", f"  %a{{c}}.next = fadd {v} %m{{c}}, %vy"], v


#: the LLVM type of the measurement's x, y, accumulators and result
_SCALAR = {"f32": "float", "f64": "double", "bf16": "float", "int8": "i32"}


def peak_module(dtype, target: Target | None = None) -> str:
    """The LLVM IR of the measurement on `target` (default: this machine): `@loom_peak(i64 n,
    x, y)` runs the chains n times (n >= 1) and returns their sum;
    `@loom_peak_parallel(n, x, y, out, threads)` runs it on `threads` threads of libgomp, each
    writing its sum to `out[thread]`. x and y are the accumulators' type (`_SCALAR`): bf16's
    are f32 values rounded to bf16 and paired, int8's i32 words of four bytes (or two i16)."""
    name, target = dtype_name(dtype), target or machine()
    lanes, chains = vector_shape(name, target)
    scalar = _SCALAR[name]
    v = f"<{lanes} x {scalar}>"
    declares, step, operands = _chain_step(name, target, lanes)
    integer = scalar == "i32"

    def start(c: int) -> str:  # chains start apart, or LLVM would see identical recurrences and merge them
        return f"<{', '.join([f'{scalar} {c + 1 if integer else 1.0 + c / 64!r}'] * lanes)}>"

    def operand(x: str) -> list[str]:
        """`%v{x}` of the operands' type from the scalar argument `%{x}`: bf16 pairs of its
        rounded value, else splatted and (int8's quads or pairs) reinterpreted."""
        if "bfloat" in operands:
            return [f"  %{x}h = fptrunc float %{x} to bfloat",
                    f"  %{x}0 = insertelement {operands} poison, bfloat %{x}h, i32 0",
                    f"  %v{x} = shufflevector {operands} %{x}0, {operands} poison, <{2 * lanes} x i32> zeroinitializer"]
        splat = f"%{x}s" if operands != v else f"%v{x}"
        lines = [f"  %{x}0 = insertelement {v} poison, {scalar} %{x}, i32 0",
                 f"  {splat} = shufflevector {v} %{x}0, {v} poison, <{lanes} x i32> zeroinitializer"]
        return lines + ([f"  %v{x} = bitcast {v} {splat} to {operands}"] if operands != v else [])

    if integer:
        reduce = f"llvm.vector.reduce.add.v{lanes}i32"
        declares = [*declares, f"declare i32 @{reduce}({v})"]
        add, total_of = "add", lambda total: f"call i32 @{reduce}({v} {total})"
    else:
        reduce = f"llvm.vector.reduce.fadd.v{lanes}{'f64' if scalar == 'double' else 'f32'}"
        declares = [*declares, f"declare {scalar} @{reduce}({scalar}, {v})"]
        add, total_of = "fadd", lambda total: f"call {scalar} @{reduce}({scalar} 0.0, {v} {total})"
    lines = [
        *declares,
        "",
        f"define {scalar} @loom_peak(i64 %n, {scalar} %x, {scalar} %y) {{",
        "entry:",
        *operand("x"),
        *operand("y"),
        "  br label %loop",
        "loop:",
        "  %i = phi i64 [ 0, %entry ], [ %i.next, %loop ]",
        *[f"  %a{c} = phi {v} [ {start(c)}, %entry ], [ %a{c}.next, %loop ]" for c in range(chains)],
        *[line.replace("{c}", str(c)) for c in range(chains) for line in step],
        "  %i.next = add i64 %i, 1",
        "  %done = icmp uge i64 %i.next, %n",
        "  br i1 %done, label %exit, label %loop",
        "exit:",
    ]
    total = "%a0.next"
    for c in range(1, chains):
        lines.append(f"  %s{c} = {add} {v} {total}, %a{c}.next")
        total = f"%s{c}"
    lines += [
        f"  %sum = {total_of(total)}",
        f"  ret {scalar} %sum",
        "}",
        "",
        "declare void @GOMP_parallel(ptr, ptr, i32, i32)",
        "declare i32 @omp_get_thread_num()",
        "",
        "define internal void @loom_peak_thread(ptr %ctx) {",
        "  %n = load i64, ptr %ctx",
        "  %xp = getelementptr i8, ptr %ctx, i64 8",
        f"  %x = load {scalar}, ptr %xp",
        "  %yp = getelementptr i8, ptr %ctx, i64 16",
        f"  %y = load {scalar}, ptr %yp",
        "  %op = getelementptr i8, ptr %ctx, i64 24",
        "  %out = load ptr, ptr %op",
        f"  %r = call {scalar} @loom_peak(i64 %n, {scalar} %x, {scalar} %y)",
        "  %t = call i32 @omp_get_thread_num()",
        f"  %slot = getelementptr {scalar}, ptr %out, i32 %t",
        f"  store {scalar} %r, ptr %slot",
        "  ret void",
        "}",
        "",
        f"define void @loom_peak_parallel(i64 %n, {scalar} %x, {scalar} %y, ptr %out, i32 %threads) {{",
        "  %ctx = alloca [4 x i64], align 8",
        "  store i64 %n, ptr %ctx",
        "  %xp = getelementptr i8, ptr %ctx, i64 8",
        f"  store {scalar} %x, ptr %xp",
        "  %yp = getelementptr i8, ptr %ctx, i64 16",
        f"  store {scalar} %y, ptr %yp",
        "  %op = getelementptr i8, ptr %ctx, i64 24",
        "  store ptr %out, ptr %op",
        "  call void @GOMP_parallel(ptr @loom_peak_thread, ptr %ctx, i32 %threads, i32 0)",
        "  ret void",
        "}",
    ]
    return "\n".join(lines) + "\n"


def _serial_module(dtype) -> str:
    """`peak_module` without its parallel part: what one thread runs where libgomp is
    missing (its declarations would not link)."""
    text = peak_module(dtype)
    return text[: text.index("declare void @GOMP_parallel")]


def measure_peak(dtype, threads: int = 1, *, iterations: int = ITERATIONS, runs: int = RUNS) -> float:
    """A fresh measurement of the peak for `dtype` on `threads` threads, GFLOP/s (GOP/s for
    int8; the instruction: `dot_path`): the
    best of `runs` runs of `iterations` iterations per thread (after one warm-up run, which
    also starts libgomp's team and lets the clock ramp up)."""
    from compiler.jit.engine import compile_ir

    name = dtype_name(dtype)
    _check_threads(threads)
    if not isinstance(iterations, int) or iterations < 1 or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"iterations and runs must be positive integers, got {iterations!r} and {runs!r}")
    if threads > 1 and openmp_runtime() is None:
        raise LoomError(f"cannot measure the FMA peak on {threads} threads: libgomp (GCC's OpenMP runtime, "
                        "Debian's libgomp1) is not installed")
    lanes, chains = vector_shape(name)
    ctype = {"float": ctypes.c_float, "double": ctypes.c_double, "i32": ctypes.c_int32}[_SCALAR[name]]
    x, y = (0x01010101, 0x01010101) if name == "int8" else (0.999, 1e-3)  # bytes (or i16) of 1, 1 and 257
    module = compile_ir(peak_module(name) if threads > 1 else _serial_module(name))
    out = (ctype * threads)()
    if threads == 1:
        serial = ctypes.CFUNCTYPE(ctype, ctypes.c_int64, ctype, ctype)(module.function_address("loom_peak"))

        def run(n: int) -> None:
            serial(n, x, y)
    else:
        parallel = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctype, ctype, ctypes.c_void_p, ctypes.c_int32)(
            module.function_address("loom_peak_parallel"))

        def run(n: int) -> None:
            parallel(n, x, y, ctypes.addressof(out), threads)

    run(max(1, iterations // 4))  # warm-up
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        run(iterations)
        best = min(best, time.perf_counter() - t0)
    return float(dot_path(name).ops_per_lane * lanes * chains * iterations * threads / best / 1e9)


def machine_key() -> str:
    """What the cached figures are keyed by: the CPU's name and features as LLVM reports
    them (the code the JIT generates depends on nothing else) and MEASUREMENT_VERSION."""
    import llvmlite.binding as llvm

    text = f"{machine().cpu}|{llvm.get_host_cpu_features().flatten()}|{MEASUREMENT_VERSION}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def cache_path() -> Path:
    """The file the figures are kept in."""
    from compiler.jit.disk_cache import cache_dir

    return cache_dir() / CACHE_FILE


def _read(path: Path) -> dict:
    """The cache file's contents, or {} when it is missing, unreadable or malformed."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or not isinstance(data.get("machines"), dict):
        return {}
    return data


def _cached_figure(data: dict, key: str, slot: str) -> float | None:
    """The figure for `slot` of machine `key` in the cache's contents, if it is a sound one."""
    entry = data["machines"].get(key) if data else None
    peaks = entry.get("peaks") if isinstance(entry, dict) else None
    value = peaks.get(slot) if isinstance(peaks, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None


def _record(path: Path, key: str, slot: str, gflops: float) -> None:
    """Write `gflops` for `slot` into the cache file (read again just before: a figure
    another process wrote meanwhile is kept; of two for one slot, the larger)."""
    data = _read(path) or {"machines": {}}
    entry = data["machines"].get(key)
    if not isinstance(entry, dict) or not isinstance(entry.get("peaks"), dict):
        entry = {"cpu": machine().cpu, "peaks": {}}
    old = _cached_figure(data, key, slot)
    entry["peaks"][slot] = max(gflops, old or 0.0)
    data["machines"][key] = entry
    fd, tmp = tempfile.mkstemp(prefix=".peak-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def peak_gflops(dtype="f32", threads: int = 1) -> float:
    """The machine's FMA peak for `dtype` (float32 or float64) on `threads` threads,
    GFLOP/s: from the cache (in memory, then `cache_path()`), else measured now (about a
    second) and cached."""
    name = dtype_name(dtype)
    _check_threads(threads)
    key = machine_key()
    slot = f"{name}:{threads}"
    with _lock:
        if (key, name, threads) in _measured:
            return _measured[(key, name, threads)]
        path = cache_path()
        figure = _cached_figure(_read(path), key, slot)
        if figure is None:
            figure = measure_peak(name, threads)
            _record(path, key, slot, figure)
        _measured[(key, name, threads)] = figure
        return figure


def remeasure(dtype="f32", threads: int = 1) -> tuple[float, float]:
    """Measure again (`loom-bench --peak`): (this measurement, the best known, which the
    cache keeps)."""
    name = dtype_name(dtype)
    key, slot = machine_key(), f"{name}:{_check_threads(threads)}"
    fresh = measure_peak(name, threads)
    with _lock:
        path = cache_path()
        _record(path, key, slot, fresh)
        best = max(fresh, _cached_figure(_read(path), key, slot) or 0.0)
        _measured[(key, name, threads)] = best
    return fresh, best

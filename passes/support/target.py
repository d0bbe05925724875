"""What the host offers a kernel: data cache sizes (from the OS) and vectors (from the CPU
features LLVM reports), as one `Target` that every pass asks: `host()`.

Every decision that depends on the vector width or the register count goes through
`host()`: the `default` pipeline's cost model (passes/analysis/cost_model.py, via loom-default)
and `loom-vectorize{width=0}` (the width of the nests loom-default vectorizes besides
matmul, the zero fill of C and the epilogues, included). Nothing in passes/ reads the
CPU's features itself.

`threads` is how many threads the `default` pipeline's parallel loops use:
`OMP_NUM_THREADS`, else the cores this process may run on (`compile(num_threads=N)`
overrides it per kernel). Whether they can run in parallel at all is whether the host
has libgomp (`openmp_runtime()`): without it loom-default plans serial code.

`LOOM_TARGET` overrides fields of it, for tests and for planning another machine's
kernels: `LOOM_TARGET="l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16"`
plans for an AVX2 machine (Zen 3) wherever Loom runs. It is a planning override only:
the JIT (compiler/jit/engine.py) always generates machine code for the real host CPU, which
LLVM legalizes any vector width onto (a vector<16xf32> becomes two ymm registers on
AVX2, a vector<8xf32> one ymm on AVX-512), so a kernel planned for another target
still runs here, and gives the same results, only not as fast. `machine()` is that real
host, without the override.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from functools import cache
from pathlib import Path

from passes.support.diagnostics import LoomError
from passes.support.units import format_bytes


@dataclass(frozen=True)
class Target:
    cpu: str
    #: data cache bytes per level (L3: the whole shared cache)
    l1: int
    l2: int
    l3: int
    vector_bits: int  # 128 (SSE/NEON), 256 (AVX2), 512 (AVX-512)
    vector_registers: int  # 16 (SSE/AVX2), 32 (AVX-512, NEON)
    fma: bool
    #: the threads a kernel's parallel loops run on (loom-default's num-threads=0)
    threads: int = 1
    #: dot-product instructions: bf16 pairs into f32 (AVX512-BF16 `vdpbf16ps`), u8 x s8
    #: quads into i32 (AVX512-VNNI or AVX-VNNI `vpdpbusd`), at the target's vector width
    bf16_dot: bool = False
    int8_dot: bool = False

    def lanes(self, element_bytes: int = 4) -> int:
        return self.vector_bits // (8 * element_bytes)

    def describe(self) -> str:
        return (f"{self.cpu}: L1d {format_bytes(self.l1)}, L2 {format_bytes(self.l2)}, L3 {format_bytes(self.l3)}, "
                f"{self.vector_bits}-bit vectors x {self.vector_registers} registers{', FMA' if self.fma else ''}")


#: used for a level the OS does not report
FALLBACK_CACHES = {1: 32 * 1024, 2: 512 * 1024, 3: 8 << 20}


def _size(text: str) -> int:
    text = text.strip().upper()
    for suffix, scale in (("K", 1024), ("M", 1 << 20), ("G", 1 << 30)):
        if text.endswith(suffix):
            return int(text[:-1]) * scale
    return int(text)


def cache_sizes(root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> dict[int, int]:
    """Data/unified cache bytes per level, as Linux reports them for cpu0."""
    found: dict[int, int] = {}
    for index in sorted(root.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = _size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified"):
            found[level] = size
    return found


def host() -> Target:
    """The target every pass plans for: the machine Loom runs on (`machine()`) with the
    fields `LOOM_TARGET` names replaced; cached per value of `LOOM_TARGET`."""
    return _host(os.environ.get("LOOM_TARGET", ""))


@cache
def _host(spec: str) -> Target:
    return override(machine(), spec)


@cache
def machine() -> Target:
    """The real host, whatever `LOOM_TARGET` says: cache sizes from /sys, vector width and
    registers from the CPU features LLVM reports (the CPU the JIT compiles for)."""
    import llvmlite.binding as llvm

    features = llvm.get_host_cpu_features()
    caches = {**FALLBACK_CACHES, **cache_sizes()}
    bits, regs = vectors_of(features)
    return Target(llvm.get_host_cpu_name(), caches[1], caches[2], caches[3], bits, regs, bool(features.get("fma")),
                  default_threads(), *dot_products_of(features, bits))


def default_threads() -> int:
    """The threads parallel loops run on when no count is given: `OMP_NUM_THREADS` (its
    first level), else the cores this process may run on."""
    first = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if first.isdigit() and int(first) > 0:
        return int(first)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@cache
def openmp_runtime() -> ctypes.CDLL | None:
    """libgomp (GCC's OpenMP runtime: Debian's libgomp1), whose thread team runs the
    parallel loops (passes/conversion/loom_lower_parallel.py); None where it is missing, and then
    compile() makes serial code."""
    try:
        return ctypes.CDLL("libgomp.so.1")
    except OSError:
        return find_library("gomp")  # runs ldconfig or a C compiler: only where the usual name fails


def find_library(name: str) -> ctypes.CDLL | None:
    """Library `name` (without lib and .so) where ctypes.util.find_library finds it, or None."""
    from ctypes.util import find_library as find  # (it imports subprocess: only when a library is looked for)

    path = find(name)
    if path:
        try:
            return ctypes.CDLL(path)
        except OSError:
            pass
    return None


def vectors_of(features: Mapping[str, bool]) -> tuple[int, int]:
    """(vector bits, vector registers) of a CPU with these LLVM features: AVX-512 has 32
    zmm registers, AVX 16 ymm, NEON 32 q registers, SSE 16 xmm."""
    if features.get("avx512f"):
        return 512, 32
    if features.get("avx"):
        return 256, 16
    if features.get("neon"):
        return 128, 32
    return 128, 16


def dot_products_of(features: Mapping[str, bool], bits: int) -> tuple[bool, bool]:
    """(bf16_dot, int8_dot) of a CPU with these LLVM features whose vectors are `bits` wide:
    below 512 bits the instructions need AVX512-VL (or, for int8, AVX-VNNI's VEX form)."""
    narrow = bits == 512 or features.get("avx512vl", False)
    return (bool(features.get("avx512bf16") and narrow),
            bool((features.get("avx512vnni") and narrow) or (features.get("avxvnni") and bits <= 256)))


#: the fields LOOM_TARGET sets with 1/0/true/false/yes/no
FLAGS = ("fma", "bf16_dot", "int8_dot")
BOOLEANS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


def override(target: Target, spec: str) -> Target:
    """`target` with the `key=value,...` fields of `spec` replaced. Sizes are positive
    (K/M/G suffixes allowed), `vector_bits` a multiple of 128, `vector_registers` at
    least 4, `fma`, `bf16_dot` and `int8_dot` one of 1/0/true/false/yes/no."""
    if not spec.strip():
        return target
    names = [f.name for f in fields(Target)]
    changes: dict[str, object] = {}
    for item in spec.split(","):
        key, _, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if key not in names or not value:
            raise LoomError(f"LOOM_TARGET: expected key=value with key in {', '.join(names)}, got '{item.strip()}'")
        if key == "cpu":
            changes[key] = value
        elif key in FLAGS:
            if value.lower() not in BOOLEANS:
                raise LoomError(f"LOOM_TARGET: '{key}' is one of {', '.join(BOOLEANS)}, got '{value}'")
            changes[key] = BOOLEANS[value.lower()]
        else:
            try:
                number = _size(value)
            except ValueError:
                raise LoomError(f"LOOM_TARGET: '{key}' needs a number, got '{value}'") from None
            if number <= 0 or (key == "vector_bits" and number % 128) or (key == "vector_registers" and number < 4):
                why = {"vector_bits": "a positive multiple of 128", "vector_registers": "at least 4"}.get(key, "positive")
                raise LoomError(f"LOOM_TARGET: '{key}' must be {why}, got {value}")
            changes[key] = number
    return replace(target, **changes)  # type: ignore[arg-type]

"""The two kinds of x86-64 host the suite must pass on, and the assembly LLVM makes for
either of them on any x86-64 host.

IR-level tests plan for each kind in turn through `LOOM_TARGET` (`planning_for`, the
`vector_target` fixture of conftest.py): what a pass decides then depends on the spec,
not on the machine the suite runs on, so a change made on one kind of host is checked
against the other too. Assembly checks read the real host (`passes.support.target.machine()`:
ymm on AVX2, zmm on AVX-512) and also compile for each kind's LLVM CPU without running
the code (`asm_for_cpu`), so that the expectations of both are checked everywhere.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace

from passes.support.target import Target, host

#: LOOM_TARGET specs of the two kinds (every field pinned: nothing is read from the host):
#: Zen 3 (AVX2, 16 ymm registers) and Zen 4 (AVX-512, 32 zmm registers)
TARGETS = {
    "avx2": "cpu=znver3,l1=32K,l2=512K,l3=32M,vector_bits=256,vector_registers=16,fma=1",
    "avx512": "cpu=znver4,l1=32K,l2=1M,l3=32M,vector_bits=512,vector_registers=32,fma=1",
}

#: the LLVM CPU of each kind, to compile its code on any x86-64 host
CPUS = {"avx2": "znver3", "avx512": "znver4"}

#: the vector registers of each width, as the assembly names them
REGISTERS = {256: "%ymm", 512: "%zmm"}


@contextmanager
def planning_for(spec: str) -> Iterator[Target]:
    """Plan for `spec` (a LOOM_TARGET value; "" for the real host) inside the block;
    yields the target the passes then see."""
    old = os.environ.get("LOOM_TARGET")
    if spec:
        os.environ["LOOM_TARGET"] = spec
    else:
        os.environ.pop("LOOM_TARGET", None)
    try:
        yield host()
    finally:
        if old is None:
            os.environ.pop("LOOM_TARGET", None)
        else:
            os.environ["LOOM_TARGET"] = old


def is_x86_64() -> bool:
    """Whether LLVM's native target is x86-64 (then it can compile for any x86-64 CPU)."""
    return platform.machine().lower() in ("x86_64", "amd64")


def asm_for_cpu(llvm_ir: str, cpu: str) -> str:
    """The assembly of `llvm_ir` optimized and compiled as the JIT would on a host whose
    LLVM CPU is `cpu` (the JIT's own O3 pipeline, `compiler.jit.engine._run_o3`), without
    running it: the other kind of host's machine code, checked here."""
    import llvmlite.binding as llvm

    from compiler.jit import engine as jit

    with jit._lock:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        llvm.initialize_native_asmparser()
        tm = llvm.Target.from_default_triple().create_target_machine(cpu=cpu, features="", opt=3)
        module = llvm.parse_assembly(llvm_ir)
        module.triple = tm.triple
        module.data_layout = str(tm.target_data)
        jit._run_o3(module, SimpleNamespace(target_machine=tm))
        return tm.emit_assembly(llvm.parse_assembly(str(module)))


def fma_registers(asm: str) -> list[str]:
    """The destination register of every packed single-precision fma in `asm`."""
    return [m.group(1) for m in re.finditer(r"^\s*vfmadd\d+ps\s+[^\n]*,\s*(%[xyz]mm\d+)\s*$", asm, re.M)]

"""x86vector.dot → LLVM's x86 intrinsics: `%a`'s group (32 bits) broadcast to every lane,
then vpmaddwd + vpaddd (`llvm.x86.avx2.pmadd.wd`, its SSE2 and AVX-512BW forms),
vpdpbusd (`llvm.x86.avx512.vpdpbusd.256`, also AVX-VNNI's) or vdpbf16ps
(`llvm.x86.avx512bf16.dpbf16ps.256`), at the accumulator's width.

LLVM aborts the process when it meets an intrinsic the CPU it compiles for lacks, so
`REQUIRES` says which features each one needs and the JIT checks them first
(`compiler/jit/engine.py`). bf16 is an i16 in Loom's LLVM IR (abi.py); the bf16 operands
of `dpbf16ps` are bitcast to `bfloat` vectors as the IR is emitted (`BFLOAT_OPERANDS`)."""

from __future__ import annotations

from xdsl.dialects import llvm
from xdsl.dialects.builtin import VectorType, i32
from xdsl.ir import SSAValue

from dialects.x86vector import DotOp
from passes.conversion.to_llvm.common import Lowering, Rewrite
from passes.conversion.to_llvm.vector import broadcast

#: the intrinsic of each instruction at 128, 256 and 512 bits
INTRINSICS = {
    "vpmaddwd": {128: "llvm.x86.sse2.pmadd.wd", 256: "llvm.x86.avx2.pmadd.wd", 512: "llvm.x86.avx512.pmaddw.d.512"},
    "vpdpbusd": {bits: f"llvm.x86.avx512.vpdpbusd.{bits}" for bits in (128, 256, 512)},
    "vdpbf16ps": {bits: f"llvm.x86.avx512bf16.dpbf16ps.{bits}" for bits in (128, 256, 512)},
}
#: the LLVM features each intrinsic needs: any one of the sets
REQUIRES: dict[str, tuple[frozenset[str], ...]] = {
    "llvm.x86.sse2.pmadd.wd": (frozenset({"sse2"}),),
    "llvm.x86.avx2.pmadd.wd": (frozenset({"avx2"}),),
    "llvm.x86.avx512.pmaddw.d.512": (frozenset({"avx512bw"}),),
    "llvm.x86.avx512.vpdpbusd.512": (frozenset({"avx512vnni"}),),
    **{f"llvm.x86.avx512.vpdpbusd.{bits}": (frozenset({"avx512vnni", "avx512vl"}), frozenset({"avxvnni"}))
       for bits in (128, 256)},
    "llvm.x86.avx512bf16.dpbf16ps.512": (frozenset({"avx512bf16"}),),
    **{f"llvm.x86.avx512bf16.dpbf16ps.{bits}": (frozenset({"avx512bf16", "avx512vl"}),) for bits in (128, 256)},
}
#: the operands (by position) that the IR emitter bitcasts from i16 to bfloat vectors
BFLOAT_OPERANDS = {name: (1, 2) for name in INTRINSICS["vdpbf16ps"].values()}


def missing_features(intrinsic: str, features: dict[str, bool]) -> str | None:
    """None when a CPU with `features` runs `intrinsic` (or it is not one of REQUIRES),
    else the features it lacks, as `avx512vnni+avx512vl or avxvnni`."""
    options = REQUIRES.get(intrinsic)
    if options is None or any(all(features.get(f) for f in option) for option in options):
        return None
    return " or ".join("+".join(sorted(option)) for option in options)


class DotLowering(Lowering):
    sources = (DotOp,)

    def lower(self, op: DotOp, r: Rewrite) -> None:
        acc_type = r.type(op.acc.type)
        assert isinstance(acc_type, VectorType)
        lanes = acc_type.element_count()
        name = INTRINSICS[op.info.name][lanes * 32]
        words = VectorType(i32, [lanes])
        # the group's 32 bits in every lane
        group = r.result(llvm.BitcastOp(r.value(op.a), i32))
        a = broadcast(r, group, words)
        b = r.value(op.b)
        a = r.result(llvm.BitcastOp(a, b.type))
        if not op.info.accumulates:  # (vpmaddwd: vpaddd after it)
            products = _call(r, name, [a, b], acc_type)
            r.replace(r.result(llvm.AddOp(r.value(op.acc), products)))
        else:
            r.replace(_call(r, name, [r.value(op.acc), *((b, a) if op.info.swapped else (a, b))], acc_type))


def _call(r: Rewrite, name: str, args: list[SSAValue], result: VectorType) -> SSAValue:
    return r.result(llvm.CallIntrinsicOp(name, args, [result]))

"""x86's dot-product instructions on vectors, as MLIR's `x86vector` dialect has them
(`x86vector.avx512.dot`, `x86vector.avx.dot.i8`): each lane of the accumulator gains the
dot product of a group of G consecutive elements of two vectors. loom-dot emits them for
a matmul whose operands loom-pack laid out in groups of G along k; loom-convert-to-llvm
lowers them to LLVM's x86 intrinsics (passes/conversion/to_llvm/x86vector.py).

    %acc2 = x86vector.dot "vpmaddwd" %acc, %a, %b : vector<2xi16>, vector<16xi16> -> vector<8xi32>

`%a` is one group (A's G elements at one row and k-group), broadcast to every lane; `%b`
holds a group per lane (B's G elements of one k-group, for L consecutive columns):
`acc2[l] = acc[l] + sum(a[g] * b[G*l + g] for g < G)`. vpdpbusd reads its first source's
bytes unsigned and its second's signed, whichever of them is the broadcast group:
`vpdpbusd.swapped` gives it `%b` first (signed A, unsigned B: a convolution's weights
times its ui8 patches).

| instruction | G | a, b | accumulator | arithmetic |
|---|---|---|---|---|
| vpmaddwd (SSE2/AVX2/AVX-512BW) + vpaddd | 2 | i16, i16 | i32 | exact, wrapping as i32 |
| vpdpbusd (AVX512-VNNI, AVX-VNNI) | 4 | ui8, i8 | i32 | exact, wrapping as i32 |
| vpdpbusd.swapped (the same instruction) | 4 | i8, ui8 | i32 | exact, wrapping as i32 |
| vdpbf16ps (AVX512-BF16) | 2 | bf16, bf16 | f32 | products exact, sums in f32, denormals flushed |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.dialects.builtin import StringAttr, VectorType
from xdsl.ir import Dialect, SSAValue
from xdsl.irdl import (
    BaseAttr,
    IRDLOperation,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException


@dataclass(frozen=True)
class Instruction:
    name: str
    #: elements per group
    group: int
    #: the element types of `a`, of `b` and of the accumulator, as they print (`str`)
    a: str
    b: str
    acc: str
    #: whether the instruction adds into the accumulator (vpmaddwd does not: vpaddd after it)
    accumulates: bool = True
    #: whether `b` is the instruction's first source and `a`'s broadcast group its second
    #: (vpdpbusd with the unsigned bytes in B)
    swapped: bool = False

    @property
    def key(self) -> str:
        """How x86vector.dot names it: `vpdpbusd`, `vpdpbusd.swapped`."""
        return f"{self.name}.swapped" if self.swapped else self.name

    @property
    def described(self) -> str:
        """`vpmaddwd + vpaddd`, `vpdpbusd`: the instructions one dot runs on."""
        return self.name if self.accumulates else f"{self.name} + vpaddd"


INSTRUCTIONS = {i.key: i for i in (
    Instruction("vpmaddwd", 2, "i16", "i16", "i32", accumulates=False),
    Instruction("vpdpbusd", 4, "ui8", "i8", "i32"),
    Instruction("vpdpbusd", 4, "i8", "ui8", "i32", swapped=True),
    Instruction("vdpbf16ps", 2, "bf16", "bf16", "f32"),
)}


@irdl_op_definition
class DotOp(IRDLOperation):
    """`acc[l] + sum(a[g] * b[G*l + g] for g < G)` on one of INSTRUCTIONS."""

    name = "x86vector.dot"
    instruction = prop_def(StringAttr)
    T: ClassVar = VarConstraint("T", BaseAttr(VectorType))
    acc = operand_def(T)
    a = operand_def(VectorType)
    b = operand_def(VectorType)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$instruction $acc `,` $a `,` $b attr-dict `:` type($a) `,` type($b) `->` type($result)"

    def __init__(self, instruction: str, acc: SSAValue, a: SSAValue, b: SSAValue):
        super().__init__(operands=[acc, a, b], result_types=[acc.type],
                         properties={"instruction": StringAttr(instruction)})

    @property
    def info(self) -> Instruction:
        return INSTRUCTIONS[self.instruction.data]

    def verify_(self) -> None:
        info = INSTRUCTIONS.get(self.instruction.data)
        if info is None:
            raise VerifyException(f"instruction '{self.instruction.data}' is not one of {', '.join(INSTRUCTIONS)}")
        acc, a, b = self.acc.type, self.a.type, self.b.type
        assert isinstance(acc, VectorType) and isinstance(a, VectorType) and isinstance(b, VectorType)
        lanes = acc.element_count()
        want = {"accumulator": (acc, [lanes], info.acc), "a": (a, [info.group], info.a),
                "b": (b, [info.group * lanes], info.b)}
        for what, (t, shape, element) in want.items():
            if t.get_shape() != tuple(shape) or str(t.get_element_type()) != element:
                raise VerifyException(
                    f"{info.name}: {what} is vector<{'x'.join(map(str, shape))}x{element}> "
                    f"(groups of {info.group}, {lanes} lanes), got {t}")
        if lanes * 32 not in (128, 256, 512):
            raise VerifyException(f"{info.name}: 128, 256 or 512-bit accumulators, got {acc}")


X86Vector = Dialect("x86vector", [DotOp], [])

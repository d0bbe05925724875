"""arith's integer casts on scalars and on vectors, as MLIR has them: xDSL 0.74's
`arith.extsi`, `arith.extui`, `arith.trunci`, `arith.sitofp` and `arith.fptosi` take scalars
only (and its `arith.extsi` declares no memory effects, so a loop holding one could not
be hoisted out of). convert-loom-to-affine widens i8/ui8 inputs and runs the quantization
steps with these, so that loom-vectorize can run them on vectors like any elementwise op,
and loom-convert-to-llvm lowers them to LLVM's casts of the same meaning.

    %w = arith_ext.extsi %x : vector<8xi8> to vector<8xi32>
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects import arith
from xdsl.dialects.builtin import AnyFloat, IntegerType, VectorType
from xdsl.ir import Attribute, Dialect, Operation, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException


def _element(t: Attribute) -> Attribute:
    return t.element_type if isinstance(t, VectorType) else t


def _a(kind: str) -> str:
    return f"an {kind}" if kind == "integer" else f"a {kind}"


def _kind(t: Attribute) -> str:
    return "integer" if isinstance(t, IntegerType) else "float" if isinstance(t, AnyFloat) else str(t)


class _CastOp(IRDLOperation):
    """One value to another type, lane by lane: a scalar to a scalar, or a vector to a
    vector of the same shape."""

    #: what the input's and the result's elements must be ("integer" or "float"), and
    #: for integers whether the result is "wider" or "narrower"
    FROM: ClassVar[str] = "integer"
    TO: ClassVar[str] = "integer"
    WIDTHS: ClassVar[str] = ""

    input = operand_def()
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `to` type($result)"

    def __init__(self, value: SSAValue | Operation, to: Attribute):
        super().__init__(operands=[value], result_types=[to])

    def verify_(self) -> None:
        source, target = self.input.type, self.result.type
        if isinstance(source, VectorType) != isinstance(target, VectorType) or (
                isinstance(source, VectorType) and source.get_shape() != target.get_shape()):
            raise VerifyException(f"casts a scalar to a scalar or a vector to a vector of the same "
                                  f"shape, got {source} to {target}")
        a, b = _element(source), _element(target)
        if _kind(a) != self.FROM or _kind(b) != self.TO:
            raise VerifyException(f"casts {_a(self.FROM)} to {_a(self.TO)}, got {a} to {b}")
        if self.WIDTHS and (a.bitwidth == b.bitwidth or (b.bitwidth > a.bitwidth) != (self.WIDTHS == "wider")):
            raise VerifyException(f"makes an integer {self.WIDTHS}, got {a} to {b}")


@irdl_op_definition
class ExtSIOp(_CastOp):
    """Sign-extends to a wider integer."""

    name = "arith_ext.extsi"
    WIDTHS: ClassVar[str] = "wider"


@irdl_op_definition
class ExtUIOp(_CastOp):
    """Zero-extends to a wider integer (the input read as unsigned)."""

    name = "arith_ext.extui"
    WIDTHS: ClassVar[str] = "wider"


@irdl_op_definition
class TruncIOp(_CastOp):
    """Keeps the low bits: a narrower integer."""

    name = "arith_ext.trunci"
    WIDTHS: ClassVar[str] = "narrower"


@irdl_op_definition
class SIToFPOp(_CastOp):
    """A signed integer to the nearest float."""

    name = "arith_ext.sitofp"
    TO: ClassVar[str] = "float"


@irdl_op_definition
class FPToSIOp(_CastOp):
    """A float to a signed integer, rounded toward zero (undefined out of range: the
    quantization clamps first)."""

    name = "arith_ext.fptosi"
    FROM: ClassVar[str] = "float"


CASTS: tuple[type[_CastOp], ...] = (ExtSIOp, ExtUIOp, TruncIOp, SIToFPOp, FPToSIOp)
#: the casts that widen a low-precision element as it is read (bf16 -> f32, i8/ui8 -> i32)
WIDENING: tuple[type[Operation], ...] = (arith.ExtFOp, ExtSIOp, ExtUIOp)
ArithExt = Dialect("arith_ext", list(CASTS), [])

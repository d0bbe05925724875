"""llvm ops that xDSL 0.74's llvm dialect lacks, used by loom-convert-to-llvm and emitted
by compiler/jit/emit.py. They extend xDSL's `llvm` dialect (same op names as MLIR's);
`dialects.context.make_context` loads them so that the pass's output parses again."""

from typing import ClassVar

from xdsl.dialects.builtin import I1, IntegerAttr, IntegerType, VectorType, i32
from xdsl.dialects.llvm import GenericCastOp, LLVMPointerType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import NoMemoryEffect


@irdl_op_definition
class FPToSIOp(GenericCastOp):
    name = "llvm.fptosi"


@irdl_op_definition
class FPToUIOp(GenericCastOp):
    name = "llvm.fptoui"


@irdl_op_definition
class UIToFPOp(GenericCastOp):
    name = "llvm.uitofp"


@irdl_op_definition
class ExtractElementOp(IRDLOperation):
    """One lane of a vector (for the vector lowering; printed in generic form)."""

    name = "llvm.extractelement"
    vector = operand_def(VectorType)
    position = operand_def(IntegerType)
    res = result_def()
    traits = traits_def(NoMemoryEffect())

    def __init__(self, vector: SSAValue, position: SSAValue):
        assert isinstance(vector.type, VectorType)
        super().__init__(operands=[vector, position], result_types=[vector.type.element_type])


@irdl_op_definition
class MaskedLoadOp(IRDLOperation):
    """`llvm.intr.masked.load`: the lanes of a vector where `mask` is set, read from
    consecutive elements at `data`; the other lanes from `pass_thru` (and not read).
    MLIR's syntax; xDSL has only the masked store."""

    name = "llvm.intr.masked.load"

    T: ClassVar = VarConstraint("T", VectorType.constr())

    data = operand_def(LLVMPointerType)
    mask = operand_def(VectorType.constr(I1))
    pass_thru = operand_def(T)
    res = result_def(T)
    alignment = prop_def(IntegerAttr[IntegerType])

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$data `,` $mask `,` $pass_thru attr-dict `:` "
        "functional-type(operands, results)"
    )

    def __init__(self, data: SSAValue, mask: SSAValue, pass_thru: SSAValue, alignment: int):
        result: Attribute = pass_thru.type
        super().__init__(
            operands=[data, mask, pass_thru],
            result_types=[result],
            properties={"alignment": IntegerAttr(alignment, i32)},
        )


@irdl_op_definition
class MaskedStoreOp(IRDLOperation):
    """`llvm.intr.masked.store` of any vector (xDSL's takes float vectors only; LLVM's any:
    an i32 accumulator's or an i8 result's remainder columns). Made by the lowering, not
    loaded into the context: the name is xDSL's op's, which parses the float form."""

    name = "llvm.intr.masked.store"

    value = operand_def(VectorType)
    data = operand_def(LLVMPointerType)
    mask = operand_def(VectorType.constr(I1))
    alignment = prop_def(IntegerAttr[IntegerType])

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$value `,` $data `,` $mask attr-dict `:` type($value) `,` type($mask) `into` type($data)"

    def __init__(self, value: SSAValue, data: SSAValue, mask: SSAValue, alignment: int):
        super().__init__(operands=[value, data, mask], properties={"alignment": IntegerAttr(alignment, i32)})


EXTRA_LLVM_OPS: tuple[type[Operation], ...] = (FPToSIOp, FPToUIOp, UIToFPOp, ExtractElementOp, MaskedLoadOp)

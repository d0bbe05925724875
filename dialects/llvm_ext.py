"""llvm ops that xDSL 0.74's llvm dialect lacks, used by loom-convert-to-llvm and emitted
by compiler/llvm_emit.py. They extend xDSL's `llvm` dialect (same op names as MLIR's);
`compiler.context.make_context` loads them so that the pass's output parses again."""

from xdsl.dialects.builtin import IntegerType, VectorType
from xdsl.dialects.llvm import GenericCastOp
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, result_def, traits_def
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


EXTRA_LLVM_OPS: tuple[type[Operation], ...] = (FPToSIOp, FPToUIOp, UIToFPOp, ExtractElementOp)

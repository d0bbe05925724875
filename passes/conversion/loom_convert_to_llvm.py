"""loom-convert-to-llvm: func/arith/math/cf/memref (after convert-scf-to-cf) → llvm dialect.

xDSL 0.74 has no usable func/arith/cf/math/memref → llvm conversions (its memref → ptr
route goes through ptrtoint/inttoptr, which stops LLVM from vectorizing), so Loom has
its own, built to give LLVM what it needs to optimize: plain pointers, `noalias`
arguments and `getelementptr inbounds` addressing.

The calling convention it follows (the memref ABI, allocation failure) is written down in
to_llvm/abi.py; the patterns live in to_llvm/, one file per source dialect (func, arith
with math and cf, memref, vector) beside the machinery they share (common.py), as MLIR's
Conversion/*ToLLVM beside LLVMCommon.

How the pass works
------------------
1. Signatures: each func.func becomes an llvm.func; block arguments of every block get
   their LLVM types, with an `unrealized_conversion_cast` back to the old type so that
   the ops inside still see memref/index values (a memref load needs the memref type).
2. Ops: one small pattern per source op or per family (tables). A pattern reads its
   operands as LLVM values (`Rewrite.value`, looking through the casts), builds llvm
   ops, and hands its results back through casts to the old types.
3. Any non-llvm op left is refused by name and location; the casts then cancel out.

What is lowered: func.func/return/call; arith constants, integer and float arithmetic
(fastmath and nsw/nuw flags kept), min/max, floordiv/ceildiv, cmpi/cmpf/select, all
casts; math ops (llvm intrinsic ops where xDSL has them, `llvm.call_intrinsic` with a
mangled name otherwise, libm calls for erf/cbrt/…); cf.br/cond_br; memref
load/store/alloc/alloca/dealloc/dim and static views (subview, reinterpret_cast, cast,
collapse/expand_shape, assume_alignment); loom.prefetch (llvm.prefetch); loom.ticks
(llvm.readcyclecounter); the 1-D vector
ops loom-vectorize emits: vector.load/store (an llvm.load/store of the vector type,
element-aligned), maskedload/maskedstore (llvm.intr.masked.load/store), broadcast
(insertelement + shufflevector), fma (llvm.intr.fma), create_mask (icmp of a lane-number
vector with a splat), `vector.reduction <add>` (llvm.intr.vector.reduce.fadd, fastmath flags
kept: `reassoc` makes it a tree sum), extract/insert of a lane and shuffle. Anything else
is refused by name.

Types are converted in one place (`abi.convert_type`). Elementwise ops take vector operands
the same way as scalars (arith.addf on vector<8xf32> → llvm.fadd on vector<8xf32>), so
vector support can be added op by op.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import llvm
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriteWalker
from xdsl.rewriter import Rewriter

from passes.conversion.to_llvm.abi import PASS
from passes.conversion.to_llvm.arith import (
    BranchLowering,
    CastLowering,
    CmpfLowering,
    CmpiLowering,
    ConstantLowering,
    FloatIntrinsicLowering,
    FloatOpLowering,
    IntBinaryLowering,
    IntMinMaxLowering,
    LibmLowering,
    MathMiscLowering,
    RoundingDivLowering,
    SelectLowering,
)
from passes.conversion.to_llvm.common import (
    Dispatch,
    Externals,
    Lowering,
    reconcile_casts,
    refuse_leftovers,
    share_constants,
)
from passes.conversion.to_llvm.func import (
    CallLowering,
    FuncLowering,
    ReturnLowering,
    add_failure_paths,
    failing_functions,
)
from passes.conversion.to_llvm.memref import (
    AllocLowering,
    DimLowering,
    LoadStoreLowering,
    PrefetchLowering,
    TicksLowering,
    ViewLowering,
)
from passes.conversion.to_llvm.vector import (
    BroadcastLowering,
    CreateMaskLowering,
    FoldConstantMask,
    LaneLowering,
    MaskedLoadStoreLowering,
    ReductionLowering,
    VectorLoadStoreLowering,
)
from passes.conversion.to_llvm.x86vector import DotLowering
from passes.support.diagnostics import LoomError


@dataclass(frozen=True)
class LoomConvertToLLVMPass(ModulePass):
    """Lower func/arith/math/cf/memref to the llvm dialect (GEP-based, noalias memrefs)."""

    name = "loom-convert-to-llvm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        scf_op = next((o for o in op.walk() if o.name.startswith("scf.")), None)
        if scf_op is not None:
            raise LoomError(f"{PASS}: run convert-scf-to-cf first ('{scf_op.name}' is still here)", scf_op)
        externals = Externals()
        failing = failing_functions(op)
        share_constants(op)
        PatternRewriteWalker(FoldConstantMask()).rewrite_module(op)
        PatternRewriteWalker(FuncLowering(failing), apply_recursively=False).rewrite_module(op)
        patterns: list[Lowering] = [
            ReturnLowering(),
            CallLowering(failing),
            ConstantLowering(),
            IntBinaryLowering(),
            IntMinMaxLowering(),
            RoundingDivLowering(),
            FloatOpLowering(),
            FloatIntrinsicLowering(),
            LibmLowering(externals),
            MathMiscLowering(),
            CmpiLowering(),
            CmpfLowering(),
            SelectLowering(),
            CastLowering(),
            BranchLowering(),
            LoadStoreLowering(),
            PrefetchLowering(),
            TicksLowering(),
            AllocLowering(externals),
            ViewLowering(),
            DimLowering(),
            VectorLoadStoreLowering(),
            MaskedLoadStoreLowering(),
            BroadcastLowering(),
            CreateMaskLowering(),
            ReductionLowering(),
            LaneLowering(),
            DotLowering(),
        ]
        PatternRewriteWalker(Dispatch(patterns), apply_recursively=False).rewrite_module(op)
        refuse_leftovers(op)
        reconcile_casts(op)
        for const in [o for o in op.walk(reverse=True) if isinstance(o, llvm.ConstantOp)]:
            if not const.result.uses:  # folded into addresses (constant indices, memref.dim)
                Rewriter.erase_op(const)
        add_failure_paths(op, failing, externals)
        externals.declare_in(op)

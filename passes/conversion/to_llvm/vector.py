"""vector → llvm, the 1-D ops loom-vectorize emits: loads and stores (masked or not),
broadcast, create_mask, reductions, lanes and shuffles; and the fold of constant masks
that runs before the lowering."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, llvm, memref, vector
from xdsl.dialects.builtin import (
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    VectorType,
    i32,
    i64,
)
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from dialects.llvm_ext import ExtractElementOp, MaskedLoadOp, MaskedStoreOp
from passes.conversion.to_llvm.abi import FLOATS, MemrefLayout
from passes.conversion.to_llvm.common import Lowering, Rewrite, fastmath
from passes.conversion.to_llvm.memref import element_pointer


def _vector_pointer(r: Rewrite, mem: SSAValue, indices: Sequence[SSAValue]) -> tuple[SSAValue, MemrefLayout]:
    """The address of a vector's first element; its lanes are the next elements of the
    last dimension, which must then have stride 1."""
    ptr, layout = element_pointer(r, mem, indices)
    if not layout.strides or layout.strides[-1] != 1:
        raise r.refuse(f"the last dimension of {mem.type} is not contiguous")
    return ptr, layout


class VectorLoadStoreLowering(Lowering):
    """vector.load/store → llvm.load/store of the vector type at the first element,
    aligned to the element only (numpy buffers are only element-aligned)."""

    sources = (vector.LoadOp, vector.StoreOp)

    def lower(self, op: Operation, r: Rewrite) -> None:
        if isinstance(op, vector.LoadOp):
            ptr, layout = _vector_pointer(r, op.base, op.indices)
            r.replace(r.result(llvm.LoadOp(ptr, r.type(op.result.type), alignment=layout.element_bytes())))
        else:
            assert isinstance(op, vector.StoreOp)
            ptr, layout = _vector_pointer(r, op.base, op.indices)
            r.rewriter.replace(op, llvm.StoreOp(r.value(op.vector), ptr, alignment=layout.element_bytes()), [])


class MaskedLoadStoreLowering(Lowering):
    """vector.maskedload/maskedstore → llvm.intr.masked.load/store at the first element
    (element-aligned); lanes off in the mask are not touched."""

    sources = (vector.MaskedLoadOp, vector.MaskedStoreOp)

    def lower(self, op: Operation, r: Rewrite) -> None:
        if isinstance(op, vector.MaskedLoadOp):
            ptr, layout = _vector_pointer(r, op.base, op.indices)
            load = MaskedLoadOp(ptr, r.value(op.mask), r.value(op.pass_thru), layout.element_bytes())
            r.replace(r.result(load))
            return
        assert isinstance(op, vector.MaskedStoreOp)
        value = r.value(op.value_to_store)
        ptr, layout = _vector_pointer(r, op.base, op.indices)
        r.rewriter.replace(op, MaskedStoreOp(value, ptr, r.value(op.mask), layout.element_bytes()), [])


def _constant_lanes(mask: SSAValue) -> int | None:
    """How many lanes `vector.create_mask %n` turns on when %n is a constant (clamped to
    0..width), else None."""
    create = mask.owner
    if not isinstance(create, vector.CreateMaskOp) or len(create.mask_dim_sizes) != 1:
        return None
    bound = create.mask_dim_sizes[0].owner
    if not isinstance(bound, arith.ConstantOp) or not isinstance(bound.value, IntegerAttr):
        return None
    width = mask.type.element_count()  # type: ignore[union-attr]
    return min(max(bound.value.value.data, 0), width)


class FoldConstantMask(RewritePattern):
    """A vector.maskedload/maskedstore whose mask is `vector.create_mask` of a constant:
    no lane on reads nothing (the pass-through) and stores nothing; every lane on is a
    plain vector.load/store; one lane on is a scalar memref.load/store of lane 0. Run
    before the lowering, as MLIR's canonicalization folds all-true and all-false masks.
    The one-lane case is the remainder of a vectorized loop one past a multiple of the
    width: as a 1-lane llvm.intr.masked.store, LLVM's x86 code generation time grew as
    the 3.7th power of their count in a block (89 s for a batched 4x64x17 f64 matmul's
    zero fill and epilogue, 0.2 s as scalar stores)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: vector.MaskedLoadOp | vector.MaskedStoreOp, rewriter: PatternRewriter) -> None:
        mask = op.mask
        lanes = _constant_lanes(mask)
        if lanes is None:
            return
        width = mask.type.element_count()  # type: ignore[union-attr]
        if isinstance(op, vector.MaskedLoadOp):
            if lanes == 0:
                rewriter.replace(op, [], [op.pass_thru])
            elif lanes == width:
                rewriter.replace(op, vector.LoadOp(op.base, op.indices, op.result.type))
            elif lanes == 1:
                load = memref.LoadOp.get(op.base, op.indices)
                rewriter.replace(op, [load, vector.InsertOp(load.res, op.pass_thru, [0])])
            else:
                return
        elif lanes == 0:
            rewriter.erase(op)
        elif lanes == width:
            rewriter.replace(op, vector.StoreOp(op.value_to_store, op.base, op.indices))
        elif lanes == 1:
            element = op.value_to_store.type.element_type  # type: ignore[union-attr]
            lane = vector.ExtractOp(op.value_to_store, [0], element)
            rewriter.replace(op, [lane, memref.StoreOp.get(lane.result, op.base, op.indices)])
        else:
            return
        if not mask.uses:
            rewriter.erase(mask.owner)  # type: ignore[arg-type]


def broadcast(r: Rewrite, scalar: SSAValue, t: VectorType) -> SSAValue:
    """A vector with `scalar` in every lane: insertelement into lane 0, then a
    shufflevector of lane 0 (LLVM's splat idiom)."""
    undef = r.result(llvm.UndefOp(t))
    lane0 = r.result(llvm.InsertElementOp(undef, scalar, r.const(0, i32)))
    zeros = DenseArrayBase.from_list(i32, [0] * t.element_count())
    return r.result(llvm.ShuffleVectorOp(lane0, undef, zeros, t))


class BroadcastLowering(Lowering):
    sources = (vector.BroadcastOp,)

    def lower(self, op: vector.BroadcastOp, r: Rewrite) -> None:
        t = r.type(op.vector.type)
        assert isinstance(t, VectorType)
        source = r.value(op.source)
        if source.type == t:
            r.replace(source)
        elif isinstance(source.type, VectorType):
            raise r.refuse(f"broadcasting {source.type} to {t}")
        else:
            r.replace(broadcast(r, source, t))


class CreateMaskLowering(Lowering):
    """vector.create_mask %n → icmp slt <0, 1, ..., w-1>, splat(%n): lanes below n are
    on (none for n <= 0, all for n >= w)."""

    sources = (vector.CreateMaskOp,)

    def lower(self, op: vector.CreateMaskOp, r: Rewrite) -> None:
        if len(op.mask_dim_sizes) != 1:
            raise r.refuse("only 1-D masks are supported")
        width = r.type(op.mask_vector.type).element_count()  # type: ignore[union-attr]
        lanes_type = VectorType(i64, [width])
        lanes = r.result(llvm.ConstantOp(DenseIntOrFPElementsAttr.from_list(lanes_type, list(range(width))), lanes_type))
        bound = broadcast(r, r.value(op.mask_dim_sizes[0]), lanes_type)
        slt = IntegerAttr(llvm.ICmpPredicateFlag("slt").to_int(), i64)
        r.replace(r.result(llvm.ICmpOp(lanes, bound, slt)))


class ReductionLowering(Lowering):
    """vector.reduction <add> on floats → llvm.intr.vector.reduce.fadd(start, v), the
    start being the accumulator operand (or -0.0). The op's fastmath flags carry over:
    with `reassoc` LLVM sums as a tree, without it strictly in lane order."""

    sources = (vector.ReductionOp,)

    def lower(self, op: vector.ReductionOp, r: Rewrite) -> None:
        if op.kind.data != vector.CombiningKindFlag.ADD:
            raise r.refuse(f"<{op.kind.data}> reductions are not supported (only <add>)")
        v = r.value(op.vector)
        element = v.type.element_type  # type: ignore[union-attr]
        if not isinstance(element, FLOATS):
            raise r.refuse(f"only float reductions are supported, got {v.type}")
        start = r.value(op.acc) if op.acc is not None else r.result(llvm.ConstantOp(FloatAttr(-0.0, element), element))
        r.replace(r.result(llvm.VectorReduceFAddOp(start, v, fastmath(op))))


def _static_lane(r: Rewrite, op: vector.ExtractOp | vector.InsertOp) -> int:
    positions = op.static_position.get_values()
    if op.dynamic_position or len(positions) != 1:
        raise r.refuse("only one static position in a 1-D vector is supported")
    return positions[0]


class LaneLowering(Lowering):
    """vector.extract/insert of one lane → llvm.extractelement/insertelement;
    vector.shuffle → llvm.shufflevector."""

    sources = (vector.ExtractOp, vector.InsertOp, vector.ShuffleOp)

    def lower(self, op: Operation, r: Rewrite) -> None:
        if isinstance(op, vector.ExtractOp):
            lane = r.const(_static_lane(r, op))
            r.replace(r.result(ExtractElementOp(r.value(op.vector), lane)))
        elif isinstance(op, vector.InsertOp):
            lane = r.const(_static_lane(r, op))
            r.replace(r.result(llvm.InsertElementOp(r.value(op.dest), r.value(op.source), lane)))
        else:
            assert isinstance(op, vector.ShuffleOp)
            v1, v2 = r.value(op.v1), r.value(op.v2)
            result = r.type(op.result.type)
            if any(isinstance(v.type, VectorType) and v.type.get_num_dims() != 1 for v in (v1, v2)):
                raise r.refuse("only 1-D shuffles are supported")
            mask = DenseArrayBase.from_list(i32, list(op.mask.get_values()))
            r.replace(r.result(llvm.ShuffleVectorOp(v1, v2, mask, result)))

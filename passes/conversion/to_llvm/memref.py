"""memref → llvm: loads and stores at `getelementptr inbounds` addresses, allocations
(heap, pool, stack), static views and dims, and loom.prefetch."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from xdsl.dialects import arith, llvm, memref
from xdsl.dialects.builtin import (
    DictionaryAttr,
    IntegerAttr,
    MemRefType,
    StringAttr,
    UnrealizedConversionCastOp,
    VectorType,
    i32,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue

from dialects.loom import PrefetchOp, TicksOp
from passes.support.heap import HEAP_ALIGNMENT, MIN_BYTES
from passes.conversion.to_llvm.abi import (
    ALLOC_SITE,
    I64_MAX,
    STATUS,
    MemrefLayout,
    byte_size,
    memref_layout,
)
from passes.conversion.to_llvm.common import Externals, Lowering, Rewrite


def _scalar_bytes(t: Attribute) -> int:
    return byte_size(t.element_type if isinstance(t, VectorType) else t)


def _constant_int(value: SSAValue) -> int | None:
    """The integer a value is known to be (an arith/llvm constant, maybe behind casts)."""
    while isinstance(value.owner, UnrealizedConversionCastOp):
        value = value.owner.inputs[0]
    owner = value.owner
    if isinstance(owner, (arith.ConstantOp, llvm.ConstantOp)) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


NSW = llvm.OverflowAttr((llvm.OverflowFlag.NO_SIGNED_WRAP,))


def element_pointer(
    r: Rewrite, mem: SSAValue, indices: Sequence[SSAValue], *, inbounds: bool = True,
) -> tuple[SSAValue, MemrefLayout]:
    """`getelementptr inbounds T, ptr base, i64 (offset + Σ idx_k·stride_k)` (without
    `inbounds` for an address that may lie outside the memref: a prefetch's)."""
    assert isinstance(mem.type, MemRefType)
    layout = memref_layout(mem.type, r.op)
    base = r.value(mem)
    constant = layout.offset
    terms: list[SSAValue] = []
    for idx, stride in zip(indices, layout.strides, strict=True):
        known = _constant_int(idx)
        if known is not None:
            constant += known * stride
        elif stride != 0:
            v = r.value(idx)
            terms.append(v if stride == 1 else r.result(llvm.MulOp(v, r.const(stride), overflow=NSW)))
    linear: int | SSAValue = constant
    if terms:
        linear = terms[0]
        for t in terms[1:]:
            linear = r.result(llvm.AddOp(linear, t, overflow=NSW))
        if constant:
            linear = r.result(llvm.AddOp(linear, r.const(constant), overflow=NSW))
    elif not -(2**31) <= constant < 2**31:  # GEP's constant indices are i32
        linear = r.const(constant)
    gep = llvm.GEPOp.from_mixed_indices(base, [linear], layout.element_type, inbounds=inbounds)
    return r.result(gep), layout


def _offset_pointer(r: Rewrite, ptr: SSAValue, delta: int, element: Attribute) -> SSAValue:
    if delta == 0:
        return ptr
    return r.result(llvm.GEPOp.from_mixed_indices(ptr, [delta], element, inbounds=True))


class LoadStoreLowering(Lowering):
    sources = (memref.LoadOp, memref.StoreOp)

    def lower(self, op: Operation, r: Rewrite) -> None:
        if isinstance(op, memref.LoadOp):
            ptr, layout = element_pointer(r, op.memref, op.indices)
            r.replace(r.result(llvm.LoadOp(ptr, layout.element_type, alignment=_scalar_bytes(layout.element_type))))
        else:
            assert isinstance(op, memref.StoreOp)
            ptr, layout = element_pointer(r, op.memref, op.indices)
            store = llvm.StoreOp(r.value(op.value), ptr, alignment=_scalar_bytes(layout.element_type))
            r.rewriter.replace(op, store, [])


class PrefetchLowering(Lowering):
    """loom.prefetch → llvm.prefetch.p0(ptr, rw, locality, 1 = data cache)."""

    sources = (PrefetchOp,)

    def lower(self, op: PrefetchOp, r: Rewrite) -> None:
        ptr, _ = element_pointer(r, op.memref, op.indices, inbounds=False)
        flags = [int(bool(op.is_write.value.data)), op.locality.value.data, 1]
        args = [ptr, *(r.result(llvm.ConstantOp(IntegerAttr(f, i32), i32)) for f in flags)]
        r.rewriter.replace(op, llvm.CallIntrinsicOp("llvm.prefetch.p0", args, []), [])


class TicksLowering(Lowering):
    """loom.ticks → llvm.readcyclecounter (rdtsc on x86)."""

    sources = (TicksOp,)

    def lower(self, op: TicksOp, r: Rewrite) -> None:
        r.replace(r.result(llvm.CallIntrinsicOp("llvm.readcyclecounter", [], [i64])))


def _heap_bytes(layout: MemrefLayout, align: int) -> int:
    """The bytes a heap buffer of `layout` takes: at least 1, rounded up to `align`."""
    nbytes = layout.extent() * layout.element_bytes()
    return min((max(nbytes, 1) + align - 1) // align * align, I64_MAX)  # memref_layout: size <= I64_MAX


@dataclass
class AllocLowering(Lowering):
    """alloc → aligned_alloc(64, size rounded up to 64), tagged with its site number, name,
    type and size in bytes (`ALLOC_SITE`) for the runtime's message should it fail;
    dealloc → free; alloca → llvm.alloca."""

    externals: Externals
    sites: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    sources = (memref.AllocOp, memref.AllocaOp, memref.DeallocOp)

    def lower(self, op: Operation, r: Rewrite) -> None:
        ptr = llvm.LLVMPointerType()
        if isinstance(op, memref.DeallocOp):
            size = _heap_bytes(memref_layout(op.memref.type, op), HEAP_ALIGNMENT)
            if size >= MIN_BYTES:  # parked for the next call (compiler/jit/pool.py)
                self.externals.use("loom_give", [ptr, i64], llvm.LLVMVoidType())
                r.rewriter.replace(op, llvm.CallOp("loom_give", r.value(op.memref), r.const(size)), [])
                return
            self.externals.use("free", [ptr], llvm.LLVMVoidType())
            r.rewriter.replace(op, llvm.CallOp("free", r.value(op.memref)), [])
            return
        assert isinstance(op, (memref.AllocOp, memref.AllocaOp))
        layout = memref_layout(op.memref.type, op)
        align = max(HEAP_ALIGNMENT, op.alignment.value.data if op.alignment else 0)
        if isinstance(op, memref.AllocaOp):
            count = r.const(max(layout.extent(), 1))
            r.replace(r.result(llvm.AllocaOp(count, layout.element_type, alignment=align)))
            return
        nbytes = layout.extent() * layout.element_bytes()
        size = _heap_bytes(layout, align)
        # pooled: 64-byte aligned (every parked buffer is), large enough to be worth it
        allocator = "loom_take" if align == HEAP_ALIGNMENT and size >= MIN_BYTES else "aligned_alloc"
        self.externals.use(allocator, [i64, i64], ptr)
        call = llvm.CallOp(allocator, r.const(align), r.const(size), return_type=ptr)
        site = {"site": IntegerAttr(next(self.sites), STATUS), "name": StringAttr(op.memref.name_hint or ""),
                "type": op.memref.type, "bytes": IntegerAttr(nbytes, i64)}
        call.attributes[ALLOC_SITE] = DictionaryAttr(site)
        call.location = op.location
        r.replace(r.result(call))


class ViewLowering(Lowering):
    """Views of a static buffer: the same base pointer (moved only if the result type's
    offset is not the offset the view implies)."""

    sources = (
        memref.SubviewOp,
        memref.ReinterpretCastOp,
        memref.CastOp,
        memref.CollapseShapeOp,
        memref.ExpandShapeOp,
        memref.AssumeAlignmentOp,
    )

    def lower(self, op: Operation, r: Rewrite) -> None:
        source = op.operands[0]
        result = op.results[0]
        if not isinstance(source.type, MemRefType) or not isinstance(result.type, MemRefType):
            raise r.refuse("unranked memrefs are not supported")
        src = memref_layout(source.type, op)
        dst = memref_layout(result.type, op)
        if isinstance(op, memref.SubviewOp):
            if op.offsets or op.sizes or op.strides:
                raise r.refuse("dynamic offsets, sizes or strides")
            offsets = op.static_offsets.get_values()
            implied = src.offset + sum(o * s for o, s in zip(offsets, src.strides))
        elif isinstance(op, memref.ReinterpretCastOp):
            if op.offsets or op.sizes or op.strides:
                raise r.refuse("dynamic offsets, sizes or strides")
            implied = op.static_offsets.get_values()[0]  # relative to the source's base
        else:
            implied = src.offset
        r.replace(_offset_pointer(r, r.value(source), implied - dst.offset, dst.element_type))


class DimLowering(Lowering):
    sources = (memref.DimOp,)

    def lower(self, op: memref.DimOp, r: Rewrite) -> None:
        if not isinstance(op.source.type, MemRefType):
            raise r.refuse("unranked memrefs are not supported")
        layout = memref_layout(op.source.type, op)
        index = _constant_int(op.index)
        if index is None or not 0 <= index < len(layout.shape):
            raise r.refuse("the dimension index must be a constant in range")
        r.replace(r.const(layout.shape[index]))

"""The calling convention of lowered code: what loom-convert-to-llvm writes and the runtime
(compiler/driver.py, compiler/jit/kernel.py, compiler/jit/pool.py) reads.

Memref ABI (the runtime relies on it)
-------------------------------------
* Only static memrefs: static shape and a static layout (identity, or
  `strided<[s0, ..., sn], offset: o>` with static values). Anything dynamic is refused.
* A memref value is one `!llvm.ptr`: the address of element 0 of the underlying
  buffer (the base, *before* the layout offset is applied).
* A memref function argument is an `!llvm.ptr {llvm.noalias, llvm.nocapture}`.
* `A[i0, ..., in]` is `getelementptr inbounds T, ptr %A, i64 (o + Σ ik·sk)`; the index
  is computed in i64 with `mul nsw`/`add nsw`, constant parts folded.
* `memref.alloc` calls `aligned_alloc(64, bytes rounded up to 64)`, `memref.dealloc`
  calls `free`; from `MIN_BYTES` (64 KiB, passes/support/heap.py) up, `loom_take(64, bytes)` and
  `loom_give(ptr, bytes)` instead, which keep the buffer for the next call (page faults
  on fresh pages cost as much as a large convolution: compiler/jit/pool.py); `memref.alloca` is an `llvm.alloca`. A memref of 2^63 bytes or more is
  refused (its sizes and addresses would wrap around in i64).
* `index` is `i64`.

Allocation failure (the runtime relies on it)
---------------------------------------------
A defined function that allocates on the heap, or calls one that does, may fail: it
returns an `i32` status instead of nothing. 0 is success; k > 0 says that allocation
site k of the module (numbered from 1 in module order) got a null pointer. Each
`aligned_alloc` call carries `{alloc_site = {site = k, name = "t", type = memref<...>}}`
and the alloc's location, from which the runtime (compiler/driver.py) builds its table of
sites. After a failed allocation, or a call that returned a nonzero status, the
function frees the heap buffers it holds at that point (those allocated on every path
to it and not yet freed) and returns k (the callee's status, unchanged). The check is
one compare and branch per allocation, marked unlikely (`llvm.expect`). A function that
may fail and returns a value is refused: it has no way to report the failure.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    AffineMapAttr,
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    MemRefType,
    NoneAttr,
    Signedness,
    StridedLayoutAttr,
    VectorType,
    i16,
    i32,
    i64,
)
from xdsl.ir import Attribute, Operation
from xdsl.ir.affine import AffineMap

from passes.support.diagnostics import LoomError

PASS = "loom-convert-to-llvm"

_SCALARS = (IntegerType, Float16Type, BFloat16Type, Float32Type, Float64Type)
FLOATS = (Float16Type, Float32Type, Float64Type)
#: bf16 in LLVM: its 16 bits, an i16 (llvmlite has no bfloat type, and LLVM lowers an
#: fptrunc to bfloat to a library call where the CPU lacks AVX512-BF16): arith.extf and
#: arith.truncf of bf16 become integer code (to_llvm/arith.py), exact and vectorizable
BF16_BITS = i16


def convert_type(t: Attribute, op: Operation | None = None) -> Attribute:
    """The LLVM-dialect type of a func/arith/memref-level type (the one place it is decided)."""
    if isinstance(t, IndexType):
        return i64
    if isinstance(t, IntegerType):
        # signedness lives in the ops (extsi/extui, sitofp/uitofp), not in LLVM's types: ui8 is i8
        return t if t.signedness.data == Signedness.SIGNLESS else IntegerType(t.width.data)
    if isinstance(t, FLOATS):
        return t
    if isinstance(t, BFloat16Type):
        return BF16_BITS
    if isinstance(t, VectorType):
        if t.get_num_scalable_dims():
            raise LoomError(f"{PASS}: scalable vectors are not supported: {t}", op)
        if t.get_num_dims() != 1:
            raise LoomError(f"{PASS}: only 1-D vectors can be lowered (unroll {t} first)", op)
        return VectorType(convert_type(t.element_type, op), t.get_shape())
    if isinstance(t, MemRefType):
        memref_layout(t, op)  # refuses what the ABI cannot express
        return llvm.LLVMPointerType()
    if isinstance(t, (llvm.LLVMPointerType, llvm.LLVMStructType, llvm.LLVMArrayType)):
        return t
    raise LoomError(f"{PASS}: no LLVM type for {t}", op)


@dataclass(frozen=True)
class MemrefLayout:
    """A static memref: where element (i0..in) lives, relative to the base pointer."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    element_type: Attribute  # already an LLVM type

    def span(self) -> tuple[int, int]:
        """Lowest and highest element index addressed, relative to the base ((0, -1) if empty)."""
        if any(n == 0 for n in self.shape):
            return 0, -1
        reach = [(n - 1) * s for n, s in zip(self.shape, self.strides)]
        return self.offset + sum(min(0, d) for d in reach), self.offset + sum(max(0, d) for d in reach)

    def extent(self) -> int:
        """Elements from the base to one past the last element (the buffer size)."""
        return self.span()[1] + 1

    def element_bytes(self) -> int:
        return byte_size(self.element_type)


def memref_layout(t: MemRefType, op: Operation | None = None) -> MemrefLayout:
    """The static layout of `t`, or a LoomError saying why the ABI cannot express it."""
    why = "only static shapes and layouts can be lowered (a memref is passed as a bare pointer)"
    if not isinstance(t.memory_space, NoneAttr):
        raise LoomError(f"{PASS}: memref memory spaces are not supported: {t}", op)
    shape = t.get_shape()
    if any(n < 0 for n in shape):
        raise LoomError(f"{PASS}: {t} has a dynamic shape; {why}", op)
    layout = t.layout
    if isinstance(layout, NoneAttr) or (isinstance(layout, AffineMapAttr) and layout.data == AffineMap.identity(len(shape))):
        strides, offset = tuple(MemRefType.strides_for_shape(shape)), 0
    elif isinstance(layout, StridedLayoutAttr):
        raw_strides, raw_offset = layout.get_strides(), layout.get_offset()
        if raw_offset is None or any(s is None for s in raw_strides):
            raise LoomError(f"{PASS}: {t} has a dynamic layout; {why}", op)
        strides, offset = tuple(s for s in raw_strides if s is not None), raw_offset
    else:
        raise LoomError(f"{PASS}: {t} has a non-strided layout; {why}", op)
    element = t.element_type
    if not isinstance(element, (*_SCALARS, IndexType, VectorType)):
        raise LoomError(f"{PASS}: unsupported memref element type {element}", op)
    result = MemrefLayout(shape, strides, offset, convert_type(element, op))
    low, high = result.span()
    if low < 0:
        raise LoomError(f"{PASS}: {t} addresses elements before its base pointer (negative offset)", op)
    if (high + 1) * result.element_bytes() > I64_MAX or any(abs(s) > I64_MAX for s in strides):
        raise LoomError(f"{PASS}: {t} spans {(high + 1) * result.element_bytes()} bytes, more than a 64-bit "
                        "address or size can hold (2^63 - 1)", op)
    return result


I64_MAX = 2**63 - 1


def byte_size(t: Attribute) -> int:
    if isinstance(t, IntegerType):
        return max(1, (t.width.data + 7) // 8)
    if isinstance(t, Float16Type):
        return 2
    if isinstance(t, Float32Type):
        return 4
    if isinstance(t, Float64Type):
        return 8
    if isinstance(t, VectorType):
        size = byte_size(t.element_type) * t.element_count()
        return 1 << (size - 1).bit_length()  # LLVM rounds vector allocations to a power of 2
    raise AssertionError(f"no byte size for {t}")


def mangle(t: Attribute) -> str:
    """The suffix of an overloaded LLVM intrinsic for type `t` (f32, v8f32, i64, p0)."""
    if isinstance(t, VectorType):
        return f"v{t.element_count()}{mangle(t.element_type)}"
    if isinstance(t, IntegerType):
        return f"i{t.width.data}"
    names = {Float16Type: "f16", Float32Type: "f32", Float64Type: "f64"}
    if type(t) in names:
        return names[type(t)]
    if isinstance(t, llvm.LLVMPointerType):
        return "p0"
    raise AssertionError(f"cannot mangle {t}")


STATUS = i32  # what a function that may fail returns: 0, or the failed allocation site
ALLOC_SITE = "alloc_site"  # the attribute of an aligned_alloc call: {site, name, type, bytes}

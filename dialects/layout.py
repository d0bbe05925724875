"""Memref layouts and aliasing: which buffer a memref value views, whether two may reach
one element, and the strided layouts views are made of (row-major strides, a layout's
static strides, the strides of a reshape without a copy). Memref layouts are not loom
ops: the dialect's verifiers, loom-bufferize and the schedule passes all read them here."""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects import func, memref
from xdsl.dialects.builtin import MemRefType, NoneAttr, StridedLayoutAttr
from xdsl.ir import Attribute, BlockArgument, SSAValue

#: ops whose memref result views the buffer of their first operand and no other (a
#: subview, a cast, a reshape): what `memref_root` follows. Shared with compiler/driver.py's
#: written-argument analysis. Any other op that makes a memref (arith.select of two, an
#: scf.if or a call's result) may give any buffer.
VIEW_OPS = (
    memref.SubviewOp, memref.CastOp, memref.ReinterpretCastOp, memref.CollapseShapeOp,
    memref.ExpandShapeOp, memref.ViewOp, memref.MemorySpaceCastOp, memref.AssumeAlignmentOp,
)
#: ops whose memref result is a new buffer, distinct from every other
BUFFER_OPS = (memref.AllocOp, memref.AllocaOp)


def memref_root(value: SSAValue) -> SSAValue | None:
    """The buffer a memref value views: through VIEW_OPS up to a function's argument or an
    allocation (BUFFER_OPS). Distinct roots are distinct buffers (function arguments are
    noalias). None for a buffer of unknown origin (`arith.select %c, %a, %b`, an scf.if's
    or a call's result, a loop's iter_arg), which may be any buffer: see `may_alias`.
    Shared by the aliasing rule of the verifiers below and the schedule passes."""
    while isinstance(owner := value.owner, VIEW_OPS):
        value = owner.operands[0]
    if isinstance(value.owner, BUFFER_OPS) or _is_function_argument(value):
        return value
    return None


def _is_function_argument(value: SSAValue) -> bool:
    if not isinstance(value, BlockArgument):
        return False
    fn = value.block.parent_op()
    return isinstance(fn, func.FuncOp) and value.block is fn.body.blocks.first


def unknown_origin(value: SSAValue) -> str:
    """Where a memref that `memref_root` cannot follow comes from, for messages: `the
    result of 'arith.select'`, `a block argument of 'scf.for'`."""
    while isinstance(owner := value.owner, VIEW_OPS):
        value = owner.operands[0]
    if isinstance(value, BlockArgument):
        parent = value.block.parent_op()
        return f"a block argument of '{parent.name}'" if parent is not None else "a block argument"
    return f"the result of '{value.owner.name}'"


def may_alias(a: SSAValue, b: SSAValue) -> bool:
    """Whether memrefs `a` and `b` may reach elements of one buffer: they have one root,
    or either root is unknown."""
    root_a, root_b = memref_root(a), memref_root(b)
    return root_a is None or root_b is None or root_a is root_b


def is_injective(shape: Sequence[int], strides: Sequence[int], itemsize: int = 1) -> bool:
    """Whether a strided layout reaches a distinct element from each index tuple, so that
    distinct subscripts are distinct elements. Sorted by |stride|, each dimension longer
    than 1 must step at least past the span of those inside it: a zero stride (a
    broadcast) or `strided<[1, 1]>` on 9x9 fails. Sufficient, not necessary (a layout it
    refuses is treated as overlapping). A dynamic extent (< 0) counts as unbounded;
    `itemsize` is an element's size in the strides' unit (numpy's strides are in bytes)."""
    if 0 in shape:
        return True  # no element at all
    span: float = itemsize  # the extent the inner dimensions reach, from one element
    for n, stride in sorted(((n, abs(s)) for n, s in zip(shape, strides) if n != 1), key=lambda d: d[1]):
        if stride < span:
            return False
        span = math.inf if n < 0 else span + stride * (n - 1)
    return True


def layout_is_injective(t: MemRefType) -> bool:
    """`is_injective` for a memref type: true for the identity layout, false for a layout
    with dynamic strides or one that is not strided (what it reaches is unknown)."""
    if isinstance(t.layout, NoneAttr):
        return True
    strides = t.get_strides()
    if strides is None or any(s is None for s in strides):
        return False
    return is_injective(t.get_shape(), strides)  # type: ignore[arg-type]


def row_major_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """The element strides of a C-contiguous array of `shape`."""
    return tuple(MemRefType.strides_for_shape(shape)) if shape else ()


def is_row_major(shape: Sequence[int], strides: Sequence[int], offset: int) -> bool:
    """Whether a layout is the identity one: row-major from offset 0, the strides of
    size-1 dimensions (never multiplied by anything but 0) aside; any layout of an
    empty shape is."""
    if 0 in shape:
        return True
    c = row_major_strides(shape)
    return offset == 0 and all(s == r for n, s, r in zip(shape, strides, c) if n != 1)


def contiguous(t: MemRefType) -> bool:
    """Whether memref type `t` reaches its buffer as a C-contiguous array does (row-major
    from offset 0): a static layout that `is_row_major`."""
    layout = static_strides(t)
    return layout is not None and is_row_major(t.get_shape(), *layout)


def strided_memref(element: Attribute, shape: Sequence[int], strides: Sequence[int], offset: int) -> MemRefType:
    """The memref type of a static layout: the identity layout when it is row-major from
    offset 0 (`is_row_major`), so that equal layouts have equal types; else
    `strided<[...], offset: o>`, size-1 dimensions given their row-major stride."""
    if is_row_major(shape, strides, offset):
        return MemRefType(element, shape)
    c = row_major_strides(shape)
    canonical = [r if n == 1 else s for n, s, r in zip(shape, strides, c)]
    return MemRefType(element, shape, StridedLayoutAttr(canonical, offset))


def static_strides(t: Attribute) -> tuple[tuple[int, ...], int] | None:
    """(element strides, offset) of a memref type with a static strided layout (the
    identity one included); None for a dynamic or non-strided one, or a type that is not
    a memref."""
    if not isinstance(t, MemRefType):
        return None
    if isinstance(t.layout, NoneAttr):
        return row_major_strides(t.get_shape()), 0
    if not isinstance(t.layout, StridedLayoutAttr):
        return None
    strides, offset = t.layout.get_strides(), t.layout.get_offset()
    if offset is None or any(s is None for s in strides):
        return None
    return tuple(strides), offset  # type: ignore[arg-type]


def reshape_strides(old_shape: Sequence[int], old_strides: Sequence[int],
                    new_shape: Sequence[int]) -> tuple[int, ...] | None:
    """The strides that view an array of `old_shape` laid out with `old_strides` as
    `new_shape` (the same elements in row-major order), or None when no strides can:
    numpy's `_attempt_nocopy_reshape`. The old dimensions are grouped with the new ones
    into runs of equal element counts; a run is a view only if its old dimensions are
    contiguous with each other (each stride the next one's times its extent)."""
    if 0 in old_shape:
        return row_major_strides(new_shape)  # no element: any strides
    old = [(n, s) for n, s in zip(old_shape, old_strides) if n != 1]
    new = list(new_shape)
    strides = [0] * len(new)
    oi = ni = 0
    while oi < len(old) and ni < len(new):
        oj, nj = oi + 1, ni + 1
        o_count, n_count = old[oi][0], new[ni]
        while o_count != n_count:
            if n_count < o_count:
                n_count *= new[nj]
                nj += 1
            else:
                o_count *= old[oj][0]
                oj += 1
        if any(old[k][1] != old[k + 1][0] * old[k + 1][1] for k in range(oi, oj - 1)):
            return None
        strides[nj - 1] = old[oj - 1][1]
        for k in range(nj - 1, ni, -1):
            strides[k - 1] = strides[k] * new[k]
        oi, ni = oj, nj
    # what is left of the new shape is 1s: their strides address nothing
    return tuple(strides[:ni]) + row_major_strides(new[ni:]) if ni < len(new) else tuple(strides)


def reinterpret(source: SSAValue, t: MemRefType) -> memref.ReinterpretCastOp:
    """`source`'s buffer viewed as `t`, a static layout whose offset counts from the
    buffer's base pointer (every view of one buffer shares its base)."""
    layout = static_strides(t)
    assert layout is not None, f"a view's layout is static: {t}"
    strides, offset = layout
    return memref.ReinterpretCastOp(source, [], [], [], [offset], t.get_shape(), strides, t)


def strided_view(source: SSAValue, shape: Sequence[int], strides: Sequence[int],
                 offset: int = 0) -> memref.ReinterpretCastOp:
    """`source`'s buffer viewed with `shape`, `strides` and `offset` exactly as given (no
    copy): the identity layout when they are the row-major ones from offset 0, else
    `strided<[...], offset: o>` (where `strided_memref` gives size-1 dimensions their
    row-major stride, so that equal layouts have equal types)."""
    identity = offset == 0 and tuple(strides) == row_major_strides(shape)
    layout = NoneAttr() if identity else StridedLayoutAttr(strides, offset)
    return reinterpret(source, MemRefType(source.type.get_element_type(), shape, layout))  # type: ignore[attr-defined]


def dimension_last(source: SSAValue, along: int) -> memref.ReinterpretCastOp:
    """`source`'s buffer viewed with its dimension `along` moved last, the others in order
    (a static layout; no copy): a transposed matrix's rows read as contiguous vectors."""
    t = source.type
    assert isinstance(t, MemRefType)
    layout = static_strides(t)
    assert layout is not None, f"a view's layout is static: {t}"
    (strides, offset), shape = layout, t.get_shape()
    order = [d for d in range(len(shape)) if d != along] + [along]
    return reinterpret(source, strided_memref(t.get_element_type(), [shape[d] for d in order],
                                              [strides[d] for d in order], offset))

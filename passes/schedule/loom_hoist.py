"""loom-hoist{op=...}: loop-invariant code motion and scalar replacement on affine nests.

The "loop invariant" and "register float c" steps of the classic matmul optimizations.
Every loop of each selected nest is visited innermost first:

- Invariant code motion: an op of the loop's body whose operands are all defined outside
  the loop moves to just before it, when it is a pure arith op (integer division and
  remainder aside: they may trap), an `affine.apply` or `affine.min`, or an
  `affine.load` from a memref that nothing in the loop stores to (distinct memref
  arguments are distinct buffers) whose indices are provably in bounds.
- Scalar replacement: when every access to a memref in the loop is an `affine.load` or
  `affine.store`, at the top of the body or under `affine.if`s there, at addresses
  invariant in the loop and pairwise either equal or provably different, each element is
  loaded once before the loop, carried through it as an iter_arg (an `affine.if` that
  stores yields the new value) and stored once after it.

```mlir
affine.for %k = 0 to 64 {                       // matmul, loop order i, j, k
  %a = affine.load %A[%i, %k] : memref<64x64xf32>
  %b = affine.load %B[%k, %j] : memref<64x64xf32>
  %c = affine.load %C[%i, %j] : memref<64x64xf32>
  %p = arith.mulf %a, %b : f32
  %s = arith.addf %c, %p : f32
  affine.store %s, %C[%i, %j] : memref<64x64xf32>
}
// becomes
%c0 = affine.load %C[%i, %j] : memref<64x64xf32>
%r = affine.for %k = 0 to 64 iter_args(%C_acc = %c0) -> (f32) {
  %a = affine.load %A[%i, %k] : memref<64x64xf32>
  %b = affine.load %B[%k, %j] : memref<64x64xf32>
  %p = arith.mulf %a, %b : f32
  %s = arith.addf %C_acc, %p : f32
  affine.yield %s : f32
}
affine.store %r, %C[%i, %j] : memref<64x64xf32>
```

Speculation is only done where it is safe: a load moved out of a loop (which may not
run) or from under a guard must have indices provably inside the memref's static shape.
The order of the floating-point operations does not change. Remarks say what moved out
of which loop, which elements became registers, and why an element read or written at an
address invariant in the loop was not promoted. Nothing is refused.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, arith, vector
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineConstantExpr, AffineExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.traits import (
    IsTerminator,
    MemoryEffectKind,
    get_effects,
    is_side_effect_free,
    is_speculatable,
)

from passes.support.remarks import remark
from dialects.layout import layout_is_injective, memref_root, unknown_origin
from passes.analysis.affine_forms import access_in_bounds
from passes.schedule.loop_transforms import (
    drop_unused_operands,
    hoist_before,
    promote_to_iter_args,
)
from passes.analysis.loop_utils import (
    LOADS,
    UNMARKED_PURE,
    access_memref,
    accessed_type,
    defined_outside,
    describe_access,
    iv_name,
    loops_of_nest,
    provably_nonempty,
    select_nests,
    simplify,
    unify_operands,
    value_name,
)

#: pure, but undefined (a trap) for a zero divisor: not executed where the loop would not
_MAY_TRAP = (
    arith.DivSIOp, arith.DivUIOp, arith.CeilDivSIOp, arith.CeilDivUIOp, arith.FloorDivSIOp,
    arith.RemSIOp, arith.RemUIOp,
)

Masked = vector.MaskedLoadOp | vector.MaskedStoreOp
AffineAccess = affine.LoadOp | affine.StoreOp | affine.VectorLoadOp | affine.VectorStoreOp
Access = AffineAccess | Masked
Store = affine.StoreOp | affine.VectorStoreOp | vector.MaskedStoreOp


@dataclass(frozen=True)
class LoomHoistPass(ModulePass):
    name = "loom-hoist"

    op: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for nest in select_nests(op, self.op, self.name):
            for access in nest.walk():
                if isinstance(access, AffineAccess | affine.ApplyOp | affine.MinOp):
                    drop_unused_operands(access)
            for loop in reversed(loops_of_nest(nest)):  # inner loops first
                self._hoist_invariants(loop)
                self._promote(loop)

    # ----------------------------------------------------------------------------------
    # invariant code motion
    # ----------------------------------------------------------------------------------

    def _hoist_invariants(self, loop: affine.ForOp) -> None:
        stored, unknown = _stored_roots(loop)
        moved: list[tuple[str, str]] = []  # (kind, the op in words)
        for op in list(loop.body.block.ops):
            if op.has_trait(IsTerminator) or op.regions:
                continue
            if not all(defined_outside(v, loop) for v in op.operands):
                continue
            if _speculatable(op):
                hoist_before(op, loop)
                moved.append((op.name, op.name))
            elif isinstance(op, affine.LoadOp):
                root = memref_root(op.memref)
                if root in stored:
                    continue  # scalar replacement's remark says why the element stays
                if unknown is None and root is None and stored:
                    unknown = f"{value_name(op.memref)}, {unknown_origin(op.memref)}, may be a buffer the loop writes"
                if unknown is not None:
                    remark(self.name, op, f"{describe_access(op)} not hoisted out of loop %{iv_name(loop)}: {unknown}",
                           missed=True)
                elif not (access_in_bounds(op) or provably_nonempty(loop)):
                    remark(self.name, op, f"{describe_access(op)} not hoisted out of loop %{iv_name(loop)}: "
                           "its indices are not provably in bounds (the loop may not run)", missed=True)
                else:
                    hoist_before(op, loop)
                    moved.append(("load", f"load {describe_access(op)}"))
        if moved:
            remark(self.name, loop, f"hoisted out of loop %{iv_name(loop)}: {', '.join(text for _, text in moved)}",
                   loop=f"%{iv_name(loop)}", kinds=tuple(kind for kind, _ in moved))

    # ----------------------------------------------------------------------------------
    # scalar replacement
    # ----------------------------------------------------------------------------------

    def _promote(self, loop: affine.ForOp) -> None:
        unknown = _stored_roots(loop)[1]
        touching: dict[SSAValue | None, list[Operation]] = {}
        anywhere: SSAValue | None = None  # a memref of unknown origin the loop accesses
        for op in loop.walk():
            if op is loop:
                continue
            memrefs = [v for v in op.operands if isinstance(v.type, MemRefType)]
            for root in dict.fromkeys(memref_root(v) for v in memrefs):
                touching.setdefault(root, []).append(op)
            anywhere = anywhere or next((v for v in memrefs if memref_root(v) is None), None)
        if unknown is None and anywhere is not None:
            unknown = f"{value_name(anywhere)}, {unknown_origin(anywhere)}, may be any buffer"
        groups: list[list[Access]] = []
        promoted: list[str] = []
        for root, ops in touching.items():
            stores = [o for o in ops if isinstance(o, Store)]
            invariant = [o for o in ops if isinstance(o, Access) and _invariant_address(o, loop)]
            if not stores or not invariant:
                continue  # read-only (for code motion), or every address moves with the loop
            found = unknown if unknown is not None else _groups(loop, ops)
            if isinstance(found, str):
                remark(self.name, invariant[0],
                       f"{_describe(invariant[0])} not promoted to a register in loop %{iv_name(loop)}: {found}",
                       missed=True)
                continue
            groups.extend(found)
            promoted.extend(_describe(g[0]) for g in found)
        if groups:
            remark(self.name, loop, f"kept in registers across loop %{iv_name(loop)} "
                   f"(loaded before, stored after): {', '.join(promoted)}", loop=f"%{iv_name(loop)}",
                   accesses=tuple(promoted))
            promote_to_iter_args(loop, groups)


def _speculatable(op: Operation) -> bool:
    if isinstance(op, (affine.ApplyOp, affine.MinOp, *UNMARKED_PURE)):
        return True
    return (
        op.name.startswith("arith.")
        and is_side_effect_free(op)
        and is_speculatable(op)
        and not isinstance(op, _MAY_TRAP)
    )


def _stored_roots(loop: affine.ForOp) -> tuple[set[SSAValue | None], str | None]:
    """The buffers something in the loop may write (None among them: one of unknown
    origin), and why the loop may write any buffer at all, if it may: an op with unknown
    memory effects and no memref operand, or a write through a memref of unknown origin."""
    stored: set[SSAValue | None] = set()
    anything = None
    for op in loop.walk():
        if op.regions or isinstance(op, LOADS) or _speculatable(op):
            continue  # the ops inside regions are walked themselves
        effects = get_effects(op)
        if effects is not None and all(e.kind != MemoryEffectKind.WRITE for e in effects):
            continue
        memrefs = [v for v in op.operands if isinstance(v.type, MemRefType)]
        stored.update(memref_root(v) for v in memrefs)
        if anything is not None:
            continue
        if effects is None and not memrefs and not op.has_trait(IsTerminator):
            anything = "an op with unknown memory effects is in the loop"
        elif (wild := next((v for v in memrefs if memref_root(v) is None), None)) is not None:
            anything = f"'{op.name}' in the loop writes {value_name(wild)}, {unknown_origin(wild)}, which may be any buffer"
    return stored, anything


def _invariant_address(op: Access, loop: affine.ForOp) -> bool:
    operands = [*op.indices, op.mask] if isinstance(op, Masked) else op.indices
    return all(defined_outside(v, loop) for v in operands)


def _address(op: Access) -> tuple[AffineMap, list[SSAValue]]:
    """The access's map and operands (a masked access reads its indices as they are)."""
    if isinstance(op, Masked):
        return AffineMap.identity(len(op.indices)), list(op.indices)
    return op.map.data, list(op.indices)


def _describe(op: Access) -> str:
    if isinstance(op, Masked):
        return f"{value_name(op.base)}[{', '.join(value_name(v) for v in op.indices)}] (masked)"
    return describe_access(op)


def _groups(loop: affine.ForOp, ops: list[Operation]) -> list[list[Access]] | str:
    """The accesses to one buffer in the loop grouped by element, or why they cannot be
    kept in registers."""
    for op in ops:
        if not isinstance(op, Access):
            return f"it is accessed by '{op.name}'"
        parent = op.parent_op()
        while parent is not loop:
            if isinstance(parent, affine.ForOp):
                return f"it is accessed inside the inner loop %{iv_name(parent)}"
            if not isinstance(parent, affine.IfOp):
                return f"it is accessed inside '{parent.name}'"
            parent = parent.parent_op()
        moving = [v for v in op.indices if not defined_outside(v, loop)]
        if moving:
            return f"{_describe(op)} is also accessed, at an address that changes in the loop ({value_name(moving[0])})"
        if isinstance(op, Masked) and not defined_outside(op.mask, loop):
            return f"the mask of {_describe(op)} is computed in the loop"
    accesses: list[Access] = ops  # type: ignore[assignment]
    if len({access_memref(op) for op in accesses}) > 1:
        return "it is accessed through several views"
    memref = access_memref(accesses[0])
    if not layout_is_injective(memref.type):  # type: ignore[arg-type]
        return f"its layout {memref.type.layout} reaches some elements from several indices"
    values, addresses = unify_operands(*(_address(op) for op in accesses), through_apply=True)
    by_address: dict[tuple, list[Access]] = {}
    for op, address in zip(accesses, addresses):
        by_address.setdefault(address, []).append(op)
    for group in by_address.values():
        widths = {_width(op) for op in group}
        if len(widths) > 1 or None in widths or len({accessed_type(op) for op in group}) > 1:
            return (f"{_describe(group[0])} is accessed both as a scalar and as a vector, "
                    "or as vectors of different types")
        masks = {op.mask if isinstance(op, Masked) else None for op in group}
        if len(masks) > 1:
            return f"{_describe(group[0])} is accessed under different masks (or with and without one)"
    groups = list(by_address.values())
    overlap = _overlap(list(by_address), [_width(g[0]) for g in groups], len(values))  # type: ignore[misc]
    if overlap is not None:
        first, second = (groups[i][0] for i in overlap)
        return f"{_describe(first)} and {_describe(second)} may be the same element"
    for group in by_address.values():
        for op in group:
            if isinstance(op, vector.MaskedLoadOp) and (leak := _lanes_leak(op, group)) is not None:
                return f"the lanes {_describe(op)} leaves out reach '{leak}'"
    runs = provably_nonempty(loop)
    for group in by_address.values():
        unconditional = runs and any(op.parent_op() is loop for op in group)
        if not (unconditional or (not isinstance(group[0], Masked) and access_in_bounds(group[0]))):
            return f"{_describe(group[0])} is not provably in bounds (the loop may not run)"
    return list(by_address.values())


#: ops that combine vectors lane by lane (lane i of the result from lane i of the operands)
_LANEWISE = (vector.FMAOp, arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.DivfOp, arith.MaximumfOp,
             arith.MinimumfOp, arith.NegfOp, arith.AddiOp, arith.SubiOp, arith.MuliOp)


def _lanes_leak(load: vector.MaskedLoadOp, group: list[Access]) -> str | None:
    """Where the lanes a masked load leaves out (pass_thru's) may be seen, if anywhere but
    the group's masked stores (which skip them): carrying the element in a register keeps
    other values in those lanes, so only lane-wise arithmetic may lie in between."""
    stores = [op for op in group if isinstance(op, vector.MaskedStoreOp)]
    work, seen = [load.result], set()
    while work:
        value = work.pop()
        for use in value.uses:
            user = use.operation
            if user in stores and use.index == len(user.operands) - 1:
                continue  # stored under the mask: the lanes outside it are not written
            if not isinstance(user, _LANEWISE):
                return user.name
            if user not in seen:
                seen.add(user)
                work.extend(user.results)
    return None


def _width(op: Access) -> int | None:
    """How many consecutive elements of the last dimension the access covers (None for a
    vector of more than one dimension)."""
    if isinstance(op, affine.LoadOp | affine.StoreOp):
        return 1
    shape = accessed_type(op).get_shape()
    return shape[0] if len(shape) == 1 else None


def _overlap(addresses: list[tuple[AffineExpr, ...]], widths: list[int], num_values: int) -> tuple[int, int] | None:
    """Two of the distinct addresses (i < j) whose accesses, covering widths[i] and
    widths[j] elements of the last dimension, may touch the same element; None when no
    two do. Addresses that differ only by constants (the copies of an unrolled body: a
    16 x 16 register tile has 256 of them) are compared in O(n log n), by sorting the
    last subscript within each run of equal other subscripts; the others pairwise."""
    split = [tuple(_split_constant(e) for e in address) for address in addresses]
    shapes: dict[tuple, list[int]] = {}
    for i, parts in enumerate(split):
        shapes.setdefault(tuple(part for part, _ in parts), []).append(i)
    found: list[tuple[int, int]] = []
    for members in shapes.values():
        runs: dict[tuple[int, ...], list[int]] = {}
        for i in members:  # a nonzero constant difference in another dimension: disjoint
            runs.setdefault(tuple(c for _, c in split[i][:-1]), []).append(i)
        for run in runs.values():
            run.sort(key=lambda i: split[i][-1][1] if split[i] else 0)
            reach: tuple[int, int] | None = None  # (end, address) of the furthest interval so far
            for i in run:
                start = split[i][-1][1] if split[i] else 0
                if reach is not None and start < reach[0]:
                    found.append((min(reach[1], i), max(reach[1], i)))
                if reach is None or start + widths[i] > reach[0]:
                    reach = (start + widths[i], i)
    for g, h in itertools.combinations(shapes.values(), 2):
        for i, j in itertools.product(g, h):
            i, j = min(i, j), max(i, j)
            diffs = [simplify(x - y, num_values) for x, y in zip(addresses[i], addresses[j])]
            if not _disjoint(diffs, widths[i], widths[j]):
                found.append((i, j))
    return min(found, default=None)


def _split_constant(expr: AffineExpr) -> tuple[AffineExpr | None, int]:
    """(the expression without its constant term, the constant): `%i + 4` -> (%i, 4).
    Of two simplified expressions, equal first parts mean a constant difference."""
    if isinstance(expr, AffineConstantExpr):
        return None, expr.value
    if (isinstance(expr, AffineBinaryOpExpr) and expr.kind == AffineBinaryOpKind.Add
            and isinstance(expr.rhs, AffineConstantExpr)):
        return expr.lhs, expr.rhs.value
    return expr, 0


def _disjoint(diffs, wa: int | None, wb: int | None) -> bool:
    """Whether accesses at addresses a and b (diffs = a - b, per dimension) covering wa and
    wb elements of the last dimension from there never touch the same element."""
    if any(_nonzero_constant(d) for d in diffs[:-1]):
        return True
    if not diffs or wa is None or wb is None:
        return False
    last = diffs[-1]
    return isinstance(last, AffineConstantExpr) and (last.value >= wb or -last.value >= wa)


def _nonzero_constant(expr) -> bool:
    return isinstance(expr, AffineConstantExpr) and expr.value != 0

"""The live-ins of an op about to be outlined: what a loop nest reads from outside it,
split into the values a new function takes as arguments (whole buffers: a function's
argument or an allocation; any other value) and the pure ops (constants, views) to rebuild
inside it. loom-outline gives each nest of a long function a function of its own with
them; loom-lower-parallel gives a parallel loop's body to threads with them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from dialects.layout import BUFFER_OPS
from passes.analysis.loop_utils import is_pure


@dataclass
class OutlineInputs:
    """What a nest reads from outside it: the new function's arguments, and the pure ops
    (constants, views) to rebuild inside it, in order."""

    arguments: list[SSAValue]
    rebuilt: list[Operation]

    def rebuild(self, block: Block) -> dict[SSAValue, SSAValue]:
        """Into `block`, the new function's body (its first arguments stand for
        `arguments`): those arguments named after the values they stand for, and the
        rebuilt ops cloned at its end. Returns what stands inside for each value outside."""
        inside: dict[SSAValue, SSAValue] = {}
        for outside, arg in zip(self.arguments, block.args):
            arg.name_hint = outside.name_hint
            inside[outside] = arg
        for op in self.rebuilt:
            clone = op.clone(value_mapper=inside)
            block.add_op(clone)
            inside.update(zip(op.results, clone.results))
        return inside


def use_inside(ops: Operation | Block, inside: dict[SSAValue, SSAValue]) -> None:
    """Make the ops of `ops` (moved into the new function) use what stands inside for each
    value outside: one use at a time, O(1) each, where replace_all_uses_with would walk
    all the value's uses."""
    for op in ops.walk():
        for i, operand in enumerate(op.operands):
            if (value := inside.get(operand)) is not None:
                op.operands[i] = value


def _defined_inside(ops: Sequence[Operation]) -> set[SSAValue]:
    values: set[SSAValue] = set()
    for op in (o for top in ops for o in top.walk()):
        values.update(op.results)
        for region in op.regions:
            for block in region.blocks:
                values.update(block.args)
    return values


def outline_inputs(nest: Operation | Sequence[Operation], entry: Block, *,
                   loop_values: bool = False) -> OutlineInputs | None:
    """The inputs of the nest (or of the ops, moved together), or None when a buffer it
    reads is not a whole buffer of the function (an argument or an allocation) or a view
    of one. With `loop_values`, a value of a loop around the nest (an iv, an iter_arg)
    that is not a memref is an input too (loom-lower-parallel outlines loops nested in
    others)."""
    ops = [nest] if isinstance(nest, Operation) else list(nest)
    inside = _defined_inside(ops)
    found = OutlineInputs([], [])
    seen: set[SSAValue] = set()

    def visit(value: SSAValue) -> bool:
        if value in inside or value in seen:
            return True
        seen.add(value)
        owner = value.owner
        if isinstance(value, BlockArgument):
            if value.block is not entry and (not loop_values or isinstance(value.type, MemRefType)):
                return False
            found.arguments.append(value)
            return True
        assert isinstance(owner, Operation)
        if isinstance(owner, BUFFER_OPS):
            found.arguments.append(value)
            return True
        if not owner.regions and not owner.successors and is_pure(owner):
            if not all(visit(v) for v in owner.operands):
                return False
            found.rebuilt.append(owner)
            return True
        if isinstance(value.type, MemRefType):
            return False  # a buffer of unknown origin: it may alias another argument
        found.arguments.append(value)
        return True

    for op in (o for top in ops for o in top.walk()):
        if not all(visit(v) for v in op.operands):
            return None
    return found

"""The live-ins of an op about to be outlined: what a loop nest reads from outside it,
split into the values a new function takes as arguments (whole buffers: a function's
argument or an allocation; any other value) and the pure ops (constants, views) to rebuild
inside it. loom-outline gives each nest of a long function a function of its own with
them; loom-lower-parallel gives a parallel loop's body to threads with them."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import memref
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from passes.analysis.loop_utils import is_pure

_BUFFERS = (memref.AllocOp, memref.AllocaOp)


@dataclass
class OutlineInputs:
    """What a nest reads from outside it: the new function's arguments, and the pure ops
    (constants, views) to rebuild inside it, in order."""

    arguments: list[SSAValue]
    rebuilt: list[Operation]


def _defined_inside(nest: Operation) -> set[SSAValue]:
    values: set[SSAValue] = set()
    for op in nest.walk():
        values.update(op.results)
        for region in op.regions:
            for block in region.blocks:
                values.update(block.args)
    return values


def outline_inputs(nest: Operation, entry: Block, *, loop_values: bool = False) -> OutlineInputs | None:
    """The nest's inputs, or None when a buffer it reads is not a whole buffer of the
    function (an argument or an allocation) or a view of one. With `loop_values`, a
    value of a loop around the nest (an iv, an iter_arg) that is not a memref is an
    input too (loom-lower-parallel outlines loops nested in others)."""
    inside = _defined_inside(nest)
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
        if isinstance(owner, _BUFFERS):
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

    for op in nest.walk():
        if not all(visit(v) for v in op.operands):
            return None
    return found

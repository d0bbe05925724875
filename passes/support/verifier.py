"""The verifier: xDSL's op, attribute and symbol-table verifiers, plus SSA dominance, which
xDSL 0.74 does not check (a use before its definition would otherwise pass and fail inside
LLVM). It runs on every input and, with `compile(stages=True)` or in loom-opt, after every
pass, so it is one linear walk. A failure is a LoomError at the failing op's location.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from xdsl.dialects import affine, arith, scf
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AffineSetAttr,
    Float80Type,
    Float128Type,
    IndexType,
    IntegerAttr,
    StringAttr,
)
from xdsl.ir import Block, BlockArgument, ErasedSSAValue, Operation, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr
from xdsl.traits import IsolatedFromAbove, IsTerminator, NoTerminator, SymbolTable
from xdsl.utils.exceptions import DiagnosticException, VerifyException

from passes.support.diagnostics import LoomError, op_location, short_message

# --------------------------------------------------------------------------------------
# Verification
# --------------------------------------------------------------------------------------


def verify(module: Operation) -> None:
    """Verify the module (xDSL's verifiers, then dominance); a failure is a LoomError at
    the failing op's location."""
    verify_ops(module)
    verify_dominance(module)


def verify_ops(root: Operation) -> None:
    """xDSL's `Operation.verify` (0.74) over the whole IR, with its own stack instead of
    recursion and one count of each region's blocks: xDSL counts a region's blocks by
    walking them, for each block's last op, which is quadratic in the blocks of a lowered
    function (4.7 s of verification for 2,400 blocks). The same checks, in the same order
    (an op's structure, its regions, then its own verifier), the first failure located."""
    blocks_in: dict[Region, int] = {}

    def count(region: Region) -> int:
        if region not in blocks_in:
            blocks_in[region] = sum(1 for _ in region.blocks)
        return blocks_in[region]

    stack: list[tuple[Operation, bool]] = [(root, False)]
    while stack:
        op, regions_done = stack.pop()
        if regions_done:
            _verify_op(op)  # first: a loom op's own message names the operand
            _check_float_types(op)
            _check_loop_step(op)
            continue
        if type(op).verify is Operation.verify:  # a few ops (llvm casts) check it themselves
            _verify_structure(op, count)
        _check_index_constants(op)
        stack.append((op, True))
        for region in reversed(op.regions):
            for block in reversed(region.blocks):
                if block.parent is not region:
                    raise LoomError(f"'{op.name}' op has a block whose parent is another region", op)
                if block.first_op is None and count(region) == 1 and not op.has_trait(NoTerminator):
                    raise LoomError(f"'{op.name}' op contains an empty block in a single-block region "
                                    f"that expects at least a terminator", op)
                for child in reversed(block.ops):
                    if child.parent is not block:
                        raise LoomError(f"'{child.name}' op's parent is not the block that holds it", child)
                    stack.append((child, False))


def _verify_structure(op: Operation, count: Callable[[Region], int]) -> None:
    """Erased operands, successors, terminators: xDSL's checks before the regions."""
    for i, operand in enumerate(op.operands):
        if isinstance(operand, ErasedSSAValue):
            raise LoomError(f"'{op.name}' op operand #{i} is a value that was erased", op)
    block = op.parent
    region = block.parent if block is not None else None
    if op.successors:
        if block is None or region is None:
            raise LoomError(f"'{op.name}' op has block successors but is in no block", op)
        if block.last_op is not op:
            raise LoomError(f"'{op.name}' op has block successors and must terminate its block", op)
        if any(s.parent is not region for s in op.successors):
            raise LoomError(f"'{op.name}' op branches to a block of a different region", op)
    if block is not None and region is not None and block.last_op is op and not op.has_trait(IsTerminator):
        n = count(region)
        parent = region.parent
        if n > 1:
            raise LoomError(f"'{op.name}' op terminates a block in a multi-block region but is not a "
                            f"terminator", op)
        if parent is not None and not parent.has_trait(NoTerminator):
            raise LoomError(f"'{op.name}' op terminates a block in a single-block region but is not a "
                            f"terminator", op)


_INT64 = range(-(2**63), 2**63)


def _check_index_constants(op: Operation) -> None:
    """xDSL's affine maps and sets and its `index` integers hold Python integers; MLIR's,
    and the lowering's index arithmetic, are 64-bit (a multiplier or a loop step of 2**64
    failed inside loom-convert-to-llvm)."""
    for attr in (*op.properties.values(), *op.attributes.values()):
        if isinstance(attr, IntegerAttr) and isinstance(attr.type, IndexType):
            if attr.value.data not in _INT64:
                raise LoomError(f"'{op.name}' op has the index constant {attr.value.data}: index values "
                                f"are 64-bit integers", op)
            continue
        if isinstance(attr, AffineMapAttr):
            exprs = attr.data.results
        elif isinstance(attr, AffineSetAttr):
            exprs = tuple(e for c in attr.data.constraints for e in (c.lhs, c.rhs))
        else:
            continue
        for expr in exprs:
            for node in expr.dfs():
                if isinstance(node, AffineConstantExpr) and node.value not in _INT64:
                    raise LoomError(f"'{op.name}' op has the constant {node.value} in {attr}: affine "
                                    f"constants are 64-bit integers", op)


_UNSUPPORTED_FLOATS = (Float80Type, Float128Type)


def _check_float_types(op: Operation) -> None:
    """f80 and f128 values are refused where they appear: Loom computes in f32 and f64
    (bf16 is stored and widened; f16 where LLVM takes it), and xDSL 0.74 can neither print nor lower f80/f128
    constants (a bare NotImplementedError from its float format)."""
    for value in (*op.results, *(a for r in op.regions for b in r.blocks for a in b.args)):
        t = value.type
        element = t.get_element_type() if hasattr(t, "get_element_type") else t
        if isinstance(element, _UNSUPPORTED_FLOATS):
            raise LoomError(f"'{op.name}' op has a value of type {t}: {element} is not supported "
                            "(Loom's floats are f32, f64, bf16 and f16)", op)


def _check_loop_step(op: Operation) -> None:
    """A loop's step must be positive, as MLIR's verifiers say (xDSL 0.74 parses
    `affine.for ... step 0`, an affine.parallel's zero step and an scf.for with a constant
    step of 0 or less: the first divided by zero in every schedule pass, the others never
    end)."""
    if isinstance(op, affine.ForOp):
        step = op.step.value.data
    elif isinstance(op, affine.ParallelOp):
        step = min((s.value.data for s in op.steps), default=1)
    elif isinstance(op, scf.ForOp) and isinstance(op.step.owner, arith.ConstantOp):
        value = op.step.owner.value
        if not isinstance(value, IntegerAttr):
            return
        step = value.value.data
    else:
        return
    if step <= 0:
        raise LoomError(f"'{op.name}' op has the step {step}: a loop's step must be positive", op)


def _verify_op(op: Operation) -> None:
    """The op's own verifier (IRDL's constraints, traits, `verify_`): a failure, or a crash
    of the verifier on a malformed op, is a LoomError at the op."""
    try:
        if type(op).verify is not Operation.verify:
            op.verify(verify_nested_ops=False)
        else:
            op.verify_()
    except (VerifyException, DiagnosticException) as e:
        if op.has_trait(SymbolTable, value_if_unregistered=False):
            _check_symbols(op)
        if op.has_trait(IsolatedFromAbove, value_if_unregistered=False):
            verify_dominance(op)  # names the use and the value (xDSL prints the whole op)
        raise LoomError(f"'{op.name}' op {short_message(str(e))}", op) from None
    except Exception as e:  # xDSL's verifiers assert what they expect of their operands
        raise LoomError(f"'{op.name}' op is malformed: its verifier failed with "
                        f"{type(e).__name__}{': ' + short_message(str(e)) if str(e).strip() else ''}", op) from None


def _check_symbols(table: Operation) -> None:
    """A symbol defined twice in `table` is an error at the second definition (the symbol
    table's own verifier names no op, and a module has no location)."""
    seen: dict[str, Operation] = {}
    for op in (op for region in table.regions for block in region.blocks for op in block.ops):
        name = op.get_attr_or_prop("sym_name")
        if not isinstance(name, StringAttr):
            continue
        if name.data in seen:
            first = op_location(seen[name.data])
            raise LoomError(f"redefinition of symbol \"{name.data}\""
                            + (f" (first defined at {first})" if first else ""), op)
        seen[name.data] = op


# --------------------------------------------------------------------------------------
# Dominance
# --------------------------------------------------------------------------------------
#
# One walk of the IR with the set of values in scope: a block's arguments and its ops'
# results enter the set as the walk passes them and leave it after the block and the
# blocks it dominates (children in the dominator tree) have been walked; an op that is
# isolated from above walks its regions with an empty set. An operand not in the set at
# its use does not dominate it. Each value enters and leaves once, each operand is one
# set lookup: linear. The walk keeps its own stack, so deep nesting costs no recursion.
#
# Symbol tables (builtin.module) hold graph regions, as in MLIR: their ops see each
# other's values in any order. An unreachable block, which nothing dominates in xDSL's
# DominanceInfo, is dominated by every block in MLIR (and LLVM): it sees the values of
# every block of its region and its own values in order.

_OP, _RESULTS, _RESTORE, _REGION, _ENTER, _LEAVE, _ADD_ALL, _DROP_OWN, _LEAVE_ALL = range(9)


def verify_dominance(root: Operation) -> None:
    """Every operand is defined before its use: earlier in the same block, in a block that
    dominates the use's block, or in an enclosing region, and not above an op isolated
    from above. The first violation is a LoomError at the use, as MLIR's
    `operand #0 does not dominate this use`."""
    visible: set[SSAValue] = set()
    stack: list[tuple] = [(_REGION, r) for r in reversed(root.regions)]
    while stack:
        task = stack.pop()
        kind = task[0]
        if kind == _OP:
            op = task[1]
            for i, value in enumerate(op.operands):
                if value not in visible:
                    raise LoomError(_dominance_message(op, i, value), op)
            stack.append((_RESULTS, op))
            if op.regions:
                if op.has_trait(IsolatedFromAbove, value_if_unregistered=False):
                    stack.append((_RESTORE, visible))
                    visible = set()
                stack.extend((_REGION, r) for r in reversed(op.regions))
        elif kind == _RESULTS:
            visible.update(task[1].results)
        elif kind == _RESTORE:
            visible = task[1]
        elif kind == _REGION:
            stack.extend(reversed(_region_events(task[1])))
        elif kind == _ENTER:
            block = task[1]
            visible.update(block.args)
            stack.extend((_OP, op) for op in reversed(block.ops))
        elif kind == _LEAVE:
            visible.difference_update(_block_values(task[1]))
        elif kind == _ADD_ALL:
            for block in task[1].blocks:
                visible.update(_block_values(block))
        elif kind == _DROP_OWN:
            visible.difference_update(_block_values(task[1]))
        elif kind == _LEAVE_ALL:
            for block in task[1].blocks:
                visible.difference_update(_block_values(block))


def _block_values(block: Block) -> Iterator[SSAValue]:
    yield from block.args
    for op in block.ops:
        yield from op.results


def _region_events(region: Region) -> list[tuple]:
    """The walk of a region's blocks: the dominator tree in preorder, each block entered
    before and left after its subtree; then the unreachable blocks."""
    blocks = list(region.blocks)
    if not blocks:
        return []
    parent = region.parent
    if parent is not None and parent.has_trait(SymbolTable, value_if_unregistered=False):
        return [(_ADD_ALL, region), *((_ENTER, b) for b in blocks), (_LEAVE_ALL, region)]
    if len(blocks) == 1:
        return [(_ENTER, blocks[0]), (_LEAVE, blocks[0])]
    children = dominator_tree(region)
    events: list[tuple] = []
    todo: list[tuple[Block, bool]] = [(blocks[0], False)]
    while todo:
        block, leaving = todo.pop()
        if leaving:
            events.append((_LEAVE, block))
            continue
        events.append((_ENTER, block))
        todo.append((block, True))
        todo.extend((c, False) for c in reversed(children.get(block, ())))
    unreachable = [b for b in blocks if b not in children]
    if unreachable:
        events.append((_ADD_ALL, region))
        for block in unreachable:
            events += [(_DROP_OWN, block), (_ENTER, block)]
        events.append((_LEAVE_ALL, region))
    return events


def _successors(block: Block, region: Region) -> list[Block]:
    last = block.last_op
    return [s for s in last.successors if s.parent is region] if last is not None else []


def immediate_dominators(region: Region) -> tuple[dict[Block, Block], list[Block]]:
    """The immediate dominator of each block reachable from the entry (the entry's is
    itself), and those blocks in reverse postorder: Cooper, Harvey and Kennedy's "A Simple,
    Fast Dominance Algorithm". xDSL's DominanceInfo keeps the set of all dominators of each
    block, quadratic in the number of blocks, which a lowered kernel has thousands of."""
    entry = region.blocks.first
    assert entry is not None
    order: list[Block] = []
    seen = {entry}
    dfs = [(entry, iter(_successors(entry, region)))]
    while dfs:
        block, succs = dfs[-1]
        for s in succs:
            if s not in seen:
                seen.add(s)
                dfs.append((s, iter(_successors(s, region))))
                break
        else:
            dfs.pop()
            order.append(block)
    order.reverse()
    index = {b: i for i, b in enumerate(order)}
    preds: dict[Block, list[Block]] = {b: [] for b in order}
    for b in order:
        for s in _successors(b, region):
            preds[s].append(b)
    idom: dict[Block, Block] = {entry: entry}

    def intersect(a: Block, b: Block) -> Block:
        while a is not b:
            while index[a] > index[b]:
                a = idom[a]
            while index[b] > index[a]:
                b = idom[b]
        return a

    changed = True
    while changed:
        changed = False
        for b in order[1:]:
            new: Block | None = None
            for p in preds[b]:
                if p in idom:
                    new = p if new is None else intersect(p, new)
                    if new is entry:  # nothing is above it: the other predecessors cannot move it, and
                        break  # walking each up to it costs its depth (a shared exit of n checks: n^2)
            assert new is not None  # b is reachable: some predecessor is processed first
            if idom.get(b) is not new:
                idom[b] = new
                changed = True
    return idom, order


def dominator_tree(region: Region) -> dict[Block, list[Block]]:
    """Children of each reachable block in the region's dominator tree (in block order)."""
    idom, order = immediate_dominators(region)
    children: dict[Block, list[Block]] = {b: [] for b in order}
    for b in region.blocks:
        if b in idom and idom[b] is not b:
            children[idom[b]].append(b)
    return children


def _dominance_message(user: Operation, i: int, value: SSAValue) -> str:
    """Why operand #i of `user` does not dominate it (the slow path: one error)."""
    head = f"'{user.name}' op operand #{i} does not dominate this use"
    name = f"%{value.name_hint}" if value.name_hint else (
        f"block argument #{value.index}" if isinstance(value, BlockArgument)
        else f"result #{value.index} of '{value.owner.name}'")
    if isinstance(value, BlockArgument):
        def_block, def_op = value.block, None
        def_loc = op_location(value.block.parent_op()) if value.block.parent_op() else None
    else:
        def_op = value.owner
        def_block = def_op.parent_block()
        def_loc = op_location(def_op)
    at = f" (defined at {def_loc})" if def_loc else ""
    if def_block is None or def_block.parent is None:
        return f"{head}: {name} is defined by an op that is not in the IR (erased or never inserted)"
    region = def_block.parent
    # the ancestor of the use in the definition's region, and an isolated op crossed on the way
    cur, isolated = user, None
    while cur is not None and cur.parent_region() is not region:
        parent = cur.parent_op()
        if parent is not None and parent.has_trait(IsolatedFromAbove, value_if_unregistered=False) \
                and isolated is None and parent.parent_region() is not None:
            isolated = parent
        cur = parent
    if cur is None:
        return f"{head}: {name} is defined in a region that does not enclose it{at}"
    if isolated is not None:
        return (f"{head}: {name} is defined outside the '{isolated.name}' op that encloses the "
                f"use, which is isolated from above{at}")
    if cur.parent_block() is def_block:
        if def_op is cur:
            return f"{head}: {name} is a result of the op that encloses the use{at}"
        return f"{head}: {name} is defined after it, later in the block{at}"
    return f"{head}: {name} is defined in a block that does not dominate the use's block{at}"

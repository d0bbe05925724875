"""Loop mechanics shared by the schedule passes (the spirit of MLIR's LoopUtils).

A *nest* is an outermost `affine.for`; `convert-loom-to-affine` tags it with
`loom.tag = "<op>"` and every schedule pass keeps the tag on the nest's outermost loop.
A *band* is a run of perfectly nested loops: each loop's body is exactly the next loop
(and the terminator).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import affine
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.ir.affine import AffineConstantExpr

from compiler.diagnostics import LoomError

TAG = "loom.tag"


def nest_tag(loop: affine.ForOp) -> str | None:
    tag = loop.attributes.get(TAG)
    return tag.data if isinstance(tag, StringAttr) else None


def move_tag(old_root: affine.ForOp, new_root: affine.ForOp) -> None:
    """Keep the nest's tag on its (new) outermost loop."""
    if old_root is new_root:
        return
    tag = old_root.attributes.pop(TAG, None)
    if tag is not None:
        new_root.attributes[TAG] = tag


def select_nests(module: ModuleOp, op: str | None) -> list[affine.ForOp]:
    """Outermost affine.for loops: those tagged `op` when given, else all of them."""
    nests = []
    for candidate in module.walk():
        if not isinstance(candidate, affine.ForOp):
            continue
        if _enclosing_for(candidate) is not None:
            continue
        if op is None or nest_tag(candidate) == op:
            nests.append(candidate)
    return nests


def _enclosing_for(op: Operation) -> affine.ForOp | None:
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, affine.ForOp):
            return parent
        parent = parent.parent_op()
    return None


def perfect_band(root: affine.ForOp) -> list[affine.ForOp]:
    """The loops perfectly nested from `root` down (root included)."""
    band = [root]
    while True:
        body = [o for o in band[-1].body.block.ops if not isinstance(o, affine.YieldOp)]
        if len(body) == 1 and isinstance(body[0], affine.ForOp) and not body[0].results:
            band.append(body[0])
        else:
            return band


def loops_of_nest(root: affine.ForOp) -> list[affine.ForOp]:
    """Every affine.for in the nest, outermost first (pre-order)."""
    return [o for o in root.walk() if isinstance(o, affine.ForOp)]


def constant_bounds(loop: affine.ForOp) -> tuple[int, int] | None:
    """(lower, upper) when both bounds are single constants."""
    lb, ub = loop.lowerBoundMap.data, loop.upperBoundMap.data
    if len(lb.results) == 1 and len(ub.results) == 1:
        lo, hi = lb.results[0], ub.results[0]
        if isinstance(lo, AffineConstantExpr) and isinstance(hi, AffineConstantExpr):
            return lo.value, hi.value
    return None


def step_of(loop: affine.ForOp) -> int:
    return loop.step.value.data


def trip_count(loop: affine.ForOp) -> int | None:
    """The constant trip count, when the bounds are constant."""
    bounds = constant_bounds(loop)
    if bounds is None:
        return None
    lo, hi = bounds
    step = step_of(loop)
    return max(0, -(-(hi - lo) // step))


def iv_name(loop: affine.ForOp) -> str:
    iv = loop.body.block.args[0]
    return iv.name_hint or "?"


def describe_band(band: Sequence[affine.ForOp]) -> str:
    return "(" + ", ".join(iv_name(l) for l in band) + ")"


def check_positive(pass_name: str, option: str, values: Sequence[int] | None, *, allow_empty: bool = False) -> tuple[int, ...]:
    """Option validation: a list of positive integers. Raises LoomError naming the pass."""
    vals = tuple(values or ())
    if not vals and not allow_empty:
        raise LoomError(f"{pass_name}: option '{option}' is required (a list of positive integers)")
    bad = [v for v in vals if not isinstance(v, int) or v < 1]
    if bad:
        raise LoomError(f"{pass_name}: option '{option}' must be positive integers, got {list(vals)}")
    return vals


def check_permutation(pass_name: str, option: str, order: Sequence[int], n: int | None = None) -> tuple[int, ...]:
    vals = tuple(order or ())
    if sorted(vals) != list(range(len(vals))) or (n is not None and len(vals) != n):
        want = f" of 0..{n - 1}" if n is not None else ""
        raise LoomError(f"{pass_name}: option '{option}' must be a permutation{want}, got {list(vals)}")
    return vals

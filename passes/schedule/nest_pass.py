"""What every schedule pass over loop nests does around its own rewrite, in one place.

A `NestPass` checks its options (every problem at once), selects the nests (`op=`, or
all of them: `select_nests`), finds the nests its options do not fit, plans every nest
before it changes any (a refusal leaves the module as it was), and then rewrites each
nest by its plan. A pass says only what is its own: its options (the dataclass fields,
`op` among them), what is wrong with them, why a nest does not fit, the plan, the
rewrite.

Without `op=`, a nest the options do not fit is skipped with a remark (the plan says
so); when that is every nest, the pass would do nothing: an error, at the first nest,
that says why for each. With `op=`, each misfit is the plan's own error.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Generic, TypeVar

from xdsl.context import Context
from xdsl.dialects import affine
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from passes.support.diagnostics import LoomError
from passes.support.remarks import remark
from passes.analysis.loop_utils import describe_band, nest_tag, raise_problems, select_nests

Plan = TypeVar("Plan")


class NestPass(ModulePass, ABC, Generic[Plan]):
    """A schedule pass that plans each selected nest, then rewrites it by its plan. A plan
    that is a string is the remark of a nest left as it is."""

    op: str | None  # the tag of the nests to work on (None: every nest); each pass's field

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        raise_problems(self.name, self.option_problems())
        idle = self.nothing_to_do()
        if idle is not None:
            remark(self.name, None, idle, missed=True)
            return
        nests = select_nests(op, self.op, self.name)
        misfits = [self.misfit(nest) for nest in nests]
        unfit = [self.misfit_line(nest, why) for nest, why in zip(nests, misfits) if why is not None]
        if self.op is None and nests and len(unfit) == len(nests):
            raise LoomError(f"{self.name}: the options fit no loop nest: {'; '.join(unfit)}", nests[0])
        plans = [self.plan(nest, why) for nest, why in zip(nests, misfits)]  # all checked before any change
        for nest, plan in zip(nests, plans):
            if isinstance(plan, str):
                remark(self.name, nest, plan, missed=True)
            else:
                self.rewrite(nest, plan)

    def option_problems(self) -> Sequence[str | None]:
        """What is wrong with the options, each in a few words (None: nothing)."""
        return ()

    def nothing_to_do(self) -> str | None:
        """Why the options ask for no change at all (a remark; no nest is selected)."""
        return None

    def misfit(self, nest: affine.ForOp) -> str | None:
        """Why the options do not fit `nest` (a band shorter than the sizes), if they do not."""
        return None

    def misfit_line(self, nest: affine.ForOp, why: str) -> str:
        """`why` (`misfit`'s answer) as a line of the error when no nest fits."""
        return f"nest '{nest_tag(nest) or 'untagged'}': {why}"

    @abstractmethod
    def plan(self, nest: affine.ForOp, misfit: str | None) -> Plan | str:
        """The plan for `nest`, or the remark of leaving it as it is; a LoomError for a nest
        the options cannot apply to. `misfit`: `misfit`'s answer for it."""

    @abstractmethod
    def rewrite(self, nest: affine.ForOp, plan: Plan) -> None:
        """Rewrite `nest` by its plan (nothing here refuses: `plan` checked it all)."""


def more_than_loops(option: str, values: Sequence[int], band: Sequence[affine.ForOp]) -> str | None:
    """Why `values` (an option's, one per loop) do not fit `band`: more of them than it has
    loops (`misfit`'s words: "3 sizes [4, 4, 4] for the 2 loops of band (%i, %j)")."""
    if len(values) <= len(band):
        return None
    return f"{len(values)} {option} {list(values)} for the {len(band)} loops of band {describe_band(band)}"

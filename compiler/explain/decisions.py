"""The schedule's decisions and their reasons, per source op, from the passes' remarks
(passes/support/remarks.py): each matmul's plan with its tiles set against the cache sizes
and the vector registers (passes/support/target.py), what was peeled, tiled, packed,
vectorized, unroll-jammed, kept in registers, prefetched, run on threads or fused, and
what a pass refused and why.

What a decision says comes from its remark's payload, the objects the remark was written
from: loom-default's plans (`plan`, `part`, `columns`, `skipped`, `passes`), the nest a
remark made under loom-default is about (`nest`, a `NestName`, whose temporary tag the
message names), what loom-hoist hoisted (`loop`, `kinds`) or kept in registers
(`accesses`); whether a pass changed something or left it as it was is the remark's
`missed`. The other remarks are shown as their passes word them.
"""

from __future__ import annotations

import linecache
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.passes import ModulePass

from passes.analysis.cost_model import MatmulPlan
from passes.schedule.loom_default import NestName, pass_list, plan_notes
from passes.support.remarks import Remark
from passes.support.units import format_bytes

_LABELS = {"loom-peel": "peeled", "loom-tile": "tiled", "loom-interchange": "interchanged", "loom-pack": "packed",
           "loom-vectorize": "vectorized", "loom-unroll-jam": "unroll-jam", "loom-unroll": "unrolled",
           "loom-prefetch": "prefetched", "loom-parallelize": "parallel", "loom-outline": "outlined",
           "loom-im2col": "rewrite", "loom-direct-conv": "rewrite"}


@dataclass(frozen=True)
class Decision:
    """One thing a schedule pass did or refused, from its remark."""

    label: str  # "vectorized", "not vectorized", "plan", "parallel", "serial", ...
    text: str
    pass_name: str
    refused: bool = False
    details: tuple[str, ...] = ()


@dataclass
class OpDecisions:
    """The decisions about the nests of one source op (the remarks at its location)."""

    location: str | None
    source: str  # the op's line in the source, when it can be read
    decisions: list[Decision] = field(default_factory=list)


@dataclass(frozen=True)
class PlannedMatmul:
    """A matmul nest loom-default planned: the cost model's plan, and what its remark
    says beside it."""

    plan: MatmulPlan
    part: int  # 0: the nest (or its main part); k: its k-th peeled copy
    location: str | None
    columns: int = 0  # the width of the column blocks its threads share (0: none)
    skipped: tuple[str, ...] = ()  # the steps skip= left out
    passes: tuple[ModulePass, ...] = ()  # its schedule (peeling aside)

    @property
    def name(self) -> str:
        p = self.plan
        return f"matmul {p.m}x{p.n}x{p.k}" + (f" (peeled copy {self.part})" if self.part else "")


def _share(part: float, whole: float) -> str:
    share = part / whole if whole else 0.0
    return f"{share:.0%}" if share >= 0.01 else f"{share:.2%}"


def plan_details(planned: PlannedMatmul, target) -> tuple[str, list[str]]:
    """A matmul plan in words: the register tile against the vector registers, each cache
    tile against the cache it is sized for, the packing; then the pass list."""
    p = planned.plan
    left_out = set(planned.skipped)
    notes = "; ".join(plan_notes(planned.columns, planned.skipped))
    tail = [*([notes] if notes else []), *([f"pass list: {pass_list(planned.passes)}"] if planned.passes else [])]
    if "tile" in left_out:
        return f"{planned.name}: not tiled (skip=tile)", tail
    if not p.rows_tiled:
        head = f"{p.m} row{'s' * (p.m != 1)} < MR={p.mr}: rows of B streamed"
        return f"{planned.name}: {head}", [p.describe().split("; estimated traffic")[0],
                                           f"not packed: {p.why_no_pack}", *tail]
    vectors = -(-p.nr // p.lanes)
    accumulators = p.mr * vectors
    lines = [f"register tile MR x NR = {p.mr}x{p.nr}: {accumulators} accumulators of {p.lanes} lanes + {vectors} "
             f"vector{'s' * (vectors != 1)} of B + 1 broadcast of A = {accumulators + vectors + 1} of the "
             f"{target.vector_registers} vector registers"]
    if p.why_no_pack.startswith("A and B fit"):
        operands = (p.m * p.k + p.k * p.n) * p.element_bytes
        lines.append(f"no cache tiles and no packing: {p.why_no_pack} ({format_bytes(operands)} of {format_bytes(target.l1)})")
    else:
        lines += _cache_tiles(p, target)
        if "pack" in left_out:
            lines.append("not packed: the packing left out (skip=pack), A and B read where they are")
        elif not p.pack:
            lines.append(f"not packed: {p.why_no_pack}")
        else:
            a = (f", A at {'k_t' if p.panels else 'i_t'} in panels of MR rows (KC x MR each)" if p.pack_a else
                 "; A's rows read in place, MR at a time (contiguous along k: no copy)")
            b = ("B at j_r a panel of NR columns at a time (KC x NR)"
                 + (", copied by the first row tile as it computes (loom-fuse-pack)" if "fuse-pack" not in left_out else "")
                 if p.panels else "B at k_t in panels of NR columns (KC x NR each)")
            lines.append({"A": "A read in place (the windows of the staged input), B packed at k_t in panels of NR "
                               "columns (KC x NR each)",
                          "B": "B read in place (the windows of the staged input), A packed at i_t in panels of MR "
                               "rows (KC x MR each)"}.get(p.in_place, f"packed: {b}{a}"))
    return f"{planned.name}: register tile {p.mr}x{p.nr}", [*lines, *tail]


def _cache_tiles(p: MatmulPlan, target) -> list[str]:
    """Each cache tile and the cache it is sized for: KC the A sliver in L1, MC the A block
    in L2, NC the B block in L3 (or NR, a panel in L2, in the panel order: cost_model.py), or all of
    its extent."""
    e = p.element_bytes

    def whole(size: int, extent: int, name: str) -> str:
        return f", all of {name}" if size >= extent else ""

    sliver, block_a, block_b, panel = p.kc * p.mr * e, p.mc * p.kc * e, p.kc * p.nc * e, p.kc * p.nr * e
    return [
        f"KC={p.kc}{whole(p.kc, p.k, 'K')}: the A sliver KC x MR ({p.kc}x{p.mr} f{8 * e}) is {format_bytes(sliver)}, "
        f"{_share(sliver, target.l1)} of L1d ({format_bytes(target.l1)})",
        f"MC={p.mc}{whole(p.mc, p.m, 'M')}: the A block MC x KC ({p.mc}x{p.kc}) is {format_bytes(block_a)}, "
        f"{_share(block_a, target.l2)} of L2 ({format_bytes(target.l2)})",
        f"NC={p.nc}{whole(p.nc, p.n, 'N')}, the panel order (one row block): a block of NC columns per thread, "
        f"B a panel KC x NR ({p.kc}x{p.nr}) at a time, {format_bytes(panel)}, {_share(panel, target.l2)} of L2 "
        f"({format_bytes(target.l2)})" if p.panels else
        f"NC={p.nc}{whole(p.nc, p.n, 'N')}: the B block KC x NC ({p.kc}x{p.nc}) is {format_bytes(block_b)}, "
        f"{_share(block_b, target.l3)} of L3 ({format_bytes(target.l3)})",
    ]


def _nest_words(name: NestName) -> str:
    """A nest loom-default named for a while (`NestName`) as its own tag and part:
    `'matmul'`, `'matmul' (main part)`, `'matmul' (peeled copy 1)`."""
    if name.part is None or name.parts == 1:
        return f"'{name.tag}'"
    return f"'{name.tag}' " + ("(main part)" if name.part == 0 else f"(peeled copy {name.part})")


def _hoisted_text(loops: Sequence[str], kinds: Counter[str]) -> str:
    """What loom-hoist moved out of loops, counted by kind: `hoisted out of loop %j: 32 ops
    (load x16, vector.broadcast x16)`."""
    total = sum(kinds.values())
    listed = ", ".join(f"{kind} x{n}" if n > 1 else kind for kind, n in kinds.items())
    return (f"hoisted out of loop{'s' * (len(loops) > 1)} {', '.join(loops)}: {total} op{'s' * (total != 1)} "
            f"({listed})")


def _registers_text(message: str, loop: str, accesses: Sequence[str]) -> str:
    """The accesses loom-hoist kept in registers across a loop, the first two and the
    last of a long list."""
    if len(accesses) <= 3:
        return message
    return (f"kept in registers across loop {loop} (loaded before, stored after): {len(accesses)} accesses, "
            f"{accesses[0]}, {accesses[1]}, ..., {accesses[-1]}")


def _label(remark: Remark) -> tuple[str, bool]:
    """A decision's label, and whether the pass left something as it was (the remark's
    `missed`), from the remark's pass and payload, never its words."""
    pass_name, payload, missed = remark.pass_name, remark.payload, remark.missed
    if pass_name == "loom-default":
        if "plan" in payload:
            return "plan", False
        if "choice" in payload:
            return "strategy", False
        if "rewrite" in payload:
            return "rewrite", False
        return ("serial" if "threads" in payload else "not scheduled" if missed else "schedule"), missed
    if pass_name == "loom-hoist" and "accesses" in payload:
        return "registers", False
    if pass_name == "loom-hoist":
        return ("not hoisted" if missed else "hoisted"), missed
    if pass_name == "loom-parallelize":
        return ("serial" if missed else "parallel"), missed
    if "fuse" in pass_name:
        return ("not fused" if missed else "fused"), missed
    label = _LABELS.get(pass_name, pass_name.removeprefix("loom-"))
    if missed:
        label = {"prefetched": "no prefetch", "unroll-jam": "not unroll-jammed", "rewrite": "not rewritten"}.get(
            label, f"not {label}")
    return label, missed


def _source_line(location: str | None, source: str, filename: str) -> str:
    """The source line a location points at (from `source` when it is that file's text,
    else read from the file), stripped; "" when there is none."""
    if location is None:
        return ""
    m = re.match(r"^(.*):(\d+):(\d+)$", location)
    if m is None:
        return ""
    path, line = m.group(1), int(m.group(2))
    if path == filename:
        lines = source.splitlines()
        text = lines[line - 1] if 0 < line <= len(lines) else ""
    else:
        text = linecache.getline(path, line)
    text = " ".join(text.split())
    return text if len(text) <= 100 else text[:97] + "..."


def schedule_decisions(remarks: Sequence[Remark], target, *, source: str = "",
                       filename: str = "<source>") -> tuple[list[OpDecisions], list[PlannedMatmul]]:
    """The remarks of a compile as decisions, grouped by the source op they are about
    (in the order they came), and the matmul plans among them."""
    where = f" on {target.describe()}"
    groups: dict[str | None, OpDecisions] = {}
    plans: list[PlannedMatmul] = []
    hoisted: dict[str | None, tuple[list[str], Counter[str]]] = {}  # each group's last decision, if a hoist
    for remark in remarks:
        payload, location = remark.payload, remark.location
        message = remark.message.replace(where, "")
        name = payload.get("nest")
        if name is not None:
            message = message.replace(f"'{name.temporary}'", _nest_words(name))
        group = groups.get(location)
        if group is None:
            group = groups[location] = OpDecisions(location, _source_line(location, source, filename))
        label, refused = _label(remark)
        last = hoisted.pop(location, None)
        if label == "plan" and "dot" not in payload:
            planned = PlannedMatmul(payload["plan"], payload["part"], location, payload["columns"],
                                    payload["skipped"], payload["passes"])
            plans.append(planned)
            text, details = plan_details(planned, target)
            group.decisions.append(Decision(label, text, remark.pass_name, False, tuple(details)))
        elif label == "hoisted" and "kinds" in payload:
            # consecutive hoists (out of a loop, then out of the one around it): one line
            loops, kinds = last if last is not None else ([], Counter())
            loops.append(payload["loop"])
            kinds.update(payload["kinds"])
            if last is not None:
                group.decisions.pop()
            group.decisions.append(Decision(label, _hoisted_text(loops, kinds), remark.pass_name))
            hoisted[location] = (loops, kinds)
        elif label == "registers":
            text = _registers_text(message, payload["loop"], payload["accesses"])
            group.decisions.append(Decision(label, text, remark.pass_name, refused))
        else:
            group.decisions.append(Decision(label, message, remark.pass_name, refused))
    return list(groups.values()), plans

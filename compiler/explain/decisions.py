"""The schedule's decisions and their reasons, per source op, from the passes' remarks
(passes/support/remarks.py): each matmul's plan with its tiles set against the cache sizes
and the vector registers (passes/support/target.py), what was peeled, tiled, packed,
vectorized, unroll-jammed, kept in registers, prefetched, run on threads or fused, and
what a pass refused and why.
"""

from __future__ import annotations

import linecache
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import ModuleOp

if TYPE_CHECKING:
    from passes.analysis.cost_model import MatmulPlan

_REMARK = re.compile(r"^(?:(?P<location>.*?): )?remark: \[(?P<pass_name>[^\]]+)\] (?P<message>.*)$", re.S)
#: the words of a remark that says a pass left something as it was
_REFUSALS = ("not vectorized", "left serial", "skipped", "not hoisted", "left as it is", "not fused", "refused",
             "stays serial", "not packed", "not peeled", "no packing")
_LABELS = {"loom-peel": "peeled", "loom-tile": "tiled", "loom-interchange": "interchanged", "loom-pack": "packed",
           "loom-vectorize": "vectorized", "loom-unroll-jam": "unroll-jam", "loom-unroll": "unrolled",
           "loom-prefetch": "prefetched", "loom-parallelize": "parallel", "loom-outline": "outlined",
           "loom-im2col": "rewrite", "loom-direct-conv": "rewrite"}
#: loom-default's temporary name for the nest it schedules (`loom_default_3`), and for
#: the parts it peels the nest into (`loom_default_3_1`)
_TEMPORARY = re.compile(r"'loom_default_(\d+)(?:_(\d+))?'")


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
    """A matmul nest loom-default planned: the cost model's plan (its remark's)."""

    plan: MatmulPlan
    part: int  # 0: the nest (or its main part); k: its k-th peeled copy
    location: str | None
    extra: str = ""  # what the remark adds to the plan (a split over threads)
    pass_list: str = ""

    @property
    def name(self) -> str:
        p = self.plan
        return f"matmul {p.m}x{p.n}x{p.k}" + (f" (peeled copy {self.part})" if self.part else "")


def parse_remark(text: str) -> tuple[str | None, str, str]:
    """(location, pass, message) of a remark's text (`Remark.__str__`)."""
    m = _REMARK.match(text)
    if m is None:
        return None, "", text
    return m.group("location"), m.group("pass_name"), m.group("message")


def _kib(nbytes: float) -> str:
    if nbytes >= 1 << 20:
        return f"{nbytes / (1 << 20):.3g} MiB"
    return f"{nbytes / 1024:.3g} KiB"


def _share(part: float, whole: float) -> str:
    share = part / whole if whole else 0.0
    return f"{share:.0%}" if share >= 0.01 else f"{share:.2%}"


def recover_plan(message: str, target) -> PlannedMatmul | None:
    """The plan behind loom-default's remark on a matmul nest, as the cost model makes it
    for the nest's extents, element size and operand read in place; None when the remark
    is not such a one or the plan made again does not describe itself as the remark says
    (then the remark is shown as it is)."""
    from passes.analysis.cost_model import plan_matmul

    m = re.match(r"matmul (\d+)x(\d+)x(\d+)(?: \(peeled copy (\d+) of the nest\))? on ", message)
    kind = re.search(r"estimated traffic in f(32|64) elements", message)
    if m is None or kind is None:
        return None
    shape = tuple(int(g) for g in m.groups()[:3])
    element = int(kind.group(1)) // 8
    # the plain plans, then the panel order's on the threads its NC says (a column block
    # each); each with A's rows read in place where it may, and packed (not contiguous)
    candidates = [(in_place, False, 1, True) for in_place in ("", "A", "B")] + [("", False, 1, False)]
    whole, nc = plan_matmul(*shape, target, element, panels=True), re.search(r"NC=(\d+)", message)
    if whole.panels and nc is not None and int(nc.group(1)) and whole.nc % int(nc.group(1)) == 0:
        candidates += [("", True, whole.nc // int(nc.group(1)), a_rows) for a_rows in (True, False)]
    for in_place, panels, threads, a_rows in candidates:
        plan = plan_matmul(*shape, target, element, in_place, panels=panels, threads=threads, a_rows=a_rows)
        described = plan.describe()
        at = message.find(": " + described)
        if at < 0:
            continue
        rest = message[at + 2 + len(described):]
        extra, _, pass_list = rest.partition("; pass list: ")
        return PlannedMatmul(plan, int(m.group(4) or 0), None, extra.removeprefix("; ").strip(), pass_list.strip())
    return None


def plan_details(planned: PlannedMatmul, target) -> tuple[str, list[str]]:
    """A matmul plan in words: the register tile against the vector registers, each cache
    tile against the cache it is sized for, the packing; then the pass list."""
    p = planned.plan
    left = re.search(r"steps left out \(skip=\): ([\w, -]+)", planned.extra)
    left_out = set(left.group(1).split(", ")) if left else set()
    tail = [*([planned.extra] if planned.extra else []),
            *([f"pass list: {planned.pass_list}"] if planned.pass_list else [])]
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
        lines.append(f"no cache tiles and no packing: {p.why_no_pack} ({_kib(operands)} of {_kib(target.l1)})")
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
        f"KC={p.kc}{whole(p.kc, p.k, 'K')}: the A sliver KC x MR ({p.kc}x{p.mr} f{8 * e}) is {_kib(sliver)}, "
        f"{_share(sliver, target.l1)} of L1d ({_kib(target.l1)})",
        f"MC={p.mc}{whole(p.mc, p.m, 'M')}: the A block MC x KC ({p.mc}x{p.kc}) is {_kib(block_a)}, "
        f"{_share(block_a, target.l2)} of L2 ({_kib(target.l2)})",
        f"NC={p.nc}{whole(p.nc, p.n, 'N')}, the panel order (one row block): a block of NC columns per thread, "
        f"B a panel KC x NR ({p.kc}x{p.nr}) at a time, {_kib(panel)}, {_share(panel, target.l2)} of L2 "
        f"({_kib(target.l2)})" if p.panels else
        f"NC={p.nc}{whole(p.nc, p.n, 'N')}: the B block KC x NC ({p.kc}x{p.nc}) is {_kib(block_b)}, "
        f"{_share(block_b, target.l3)} of L3 ({_kib(target.l3)})",
    ]


def _temporary_names(remarks: Sequence[tuple[str | None, str, str]], scheduled: ModuleOp | None) -> dict[str, str]:
    """loom-default's temporary nest names in the remarks (`'loom_default_3_1'`) -> the
    nest's own tag and part (`'matmul' (peeled copy 1)`), read off the scheduled module:
    its nests are in the order loom-default took them, each followed by the copies it was
    peeled into. {} when the count does not add up (the names then stay as they are)."""
    from passes.analysis.loop_utils import nest_tag, outermost_nests

    parts: dict[int, int] = {}
    for _, _, message in remarks:
        for m in _TEMPORARY.finditer(message):
            index, part = int(m.group(1)), int(m.group(2) or 0)
            parts[index] = max(parts.get(index, 1), part + 1)
    if not parts or scheduled is None:
        return {}
    nests = outermost_nests(scheduled)
    names: dict[str, str] = {}
    position = 0
    for index in range(max(parts) + 1):
        count = parts.get(index, 1)
        if position + count > len(nests):
            return {}
        tag = nest_tag(nests[position]) or "untagged"
        names[f"'loom_default_{index}'"] = f"'{tag}'"
        for part in range(count):
            suffix = f" (peeled copy {part})" if part else " (main part)" if count > 1 else ""
            names[f"'loom_default_{index}_{part}'"] = f"'{tag}'{suffix}"
        position += count
    return names


def _shorten(message: str) -> str:
    """Long lists in a remark, counted: the ops hoisted out of a loop, the accesses kept
    in registers across one."""
    m = re.match(r"(hoisted out of loop \S+): (.*)$", message)
    if m:
        ops = _split_top(m.group(2))
        counts: dict[str, int] = {}
        for op in ops:  # `affine.apply`, `load %a[%i, %k]`: counted by kind
            kind = op.split(" ")[0]
            counts[kind] = counts.get(kind, 0) + 1
        listed = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in counts.items())
        return f"{m.group(1)}: {len(ops)} op{'s' * (len(ops) != 1)} ({listed})"
    m = re.match(r"(kept in registers across loop \S+ \(loaded before, stored after\)): (.*)$", message)
    if m:
        items = _split_top(m.group(2))
        if len(items) > 3:
            return f"{m.group(1)}: {len(items)} accesses, {', '.join(items[:2])}, ..., {items[-1]}"
    return message


def _split_top(text: str) -> list[str]:
    """`a[i, j], b[k]` -> [`a[i, j]`, `b[k]`]: split at the commas outside brackets."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch in "[(") - (ch in "])")
        if ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    items.append(text[start:].strip())
    return items


def _label(pass_name: str, message: str) -> tuple[str, bool]:
    """A decision's label, and whether it says something was refused or left as it was."""
    refused = any(word in message for word in _REFUSALS)
    if pass_name == "loom-default":
        if message.startswith("matmul "):
            return "plan", False
        if message.startswith("conv2d ") and (": direct: " in message or ": im2col: " in message):
            return "strategy", False
        if "direct convolution" in message or "patch matrix" in message:
            return "rewrite", False
        return ("serial" if "serial" in message else "not scheduled" if refused else "schedule"), refused
    if pass_name == "loom-parallelize":
        return ("serial" if refused else "parallel"), refused
    if pass_name == "loom-hoist":
        if message.startswith("kept in registers"):
            return "registers", False
        return ("not hoisted" if refused else "hoisted"), refused
    if "fuse" in pass_name:
        return ("not fused" if refused else "fused"), refused
    label = _LABELS.get(pass_name, pass_name.removeprefix("loom-"))
    if refused:
        label = {"prefetched": "no prefetch", "unroll-jam": "not unroll-jammed", "rewrite": "not rewritten"}.get(
            label, f"not {label}")
    return label, refused


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


def schedule_decisions(remarks: Sequence[str], target, *, source: str = "", filename: str = "<source>",
                       scheduled: ModuleOp | None = None) -> tuple[list[OpDecisions], list[PlannedMatmul]]:
    """The remarks of a compile as decisions, grouped by the source op they are about
    (in the order they came), and the matmul plans among them."""
    parsed = [parse_remark(r) for r in remarks]
    names = _temporary_names(parsed, scheduled)
    where = f" on {target.describe()}"
    groups: dict[str | None, OpDecisions] = {}
    plans: list[PlannedMatmul] = []
    for location, pass_name, original in parsed:
        message = _TEMPORARY.sub(lambda m: names.get(m.group(0), m.group(0)), original).replace(where, "")
        group = groups.get(location)
        if group is None:
            group = groups[location] = OpDecisions(location, _source_line(location, source, filename))
        label, refused = _label(pass_name, message)
        if label == "plan":
            planned = recover_plan(original, target)
            if planned is not None:
                planned = PlannedMatmul(planned.plan, planned.part, location, planned.extra, planned.pass_list)
                plans.append(planned)
                text, details = plan_details(planned, target)
                group.decisions.append(Decision(label, text, pass_name, False, tuple(details)))
                continue
        group.decisions.append(Decision(label, _shorten(message), pass_name, refused))
    for group in groups.values():
        group.decisions = _merge_hoisted(group.decisions)
    return list(groups.values()), plans


def _merge_hoisted(decisions: list[Decision]) -> list[Decision]:
    """Consecutive `hoisted out of loop %x: ...` decisions as one line over their loops."""
    out: list[Decision] = []
    pattern = re.compile(r"hoisted out of loops? (.+?): (\d+) ops? \((.*)\)$")
    for d in decisions:
        m = pattern.match(d.text)
        last = out[-1] if out else None
        previous = pattern.match(last.text) if last and last.label == "hoisted" else None
        if m is None or d.label != "hoisted" or previous is None:
            out.append(d)
            continue
        counts: dict[str, int] = {}
        for listing in (previous.group(3), m.group(3)):
            for item in listing.split(", "):
                op, _, n = item.partition(" x")
                counts[op] = counts.get(op, 0) + int(n or 1)
        loops = f"{previous.group(1)}, {m.group(1)}"
        total = int(previous.group(2)) + int(m.group(2))
        listed = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in counts.items())
        out[-1] = Decision("hoisted", f"hoisted out of loops {loops}: {total} ops ({listed})", d.pass_name)
    return out

"""`compiler.explain`: what Loom did to a kernel and why, and how fast it runs.

    report = compiler.explain(fn, x, w, b)        # a @compiler.jit function and its arguments
    report = compiler.explain(mlir_text, a, b)    # or loom-dialect text (or a Kernel compiled with stages=True)
    print(report)                                 # loom-run FILE --explain prints the same

The report has, per kernel:

- the loop nest after each stage as pseudo-code, one line per loop (Halide's
  `print_loop_nest`): the loom ops as written, the textbook loops of
  convert-loom-to-affine, and the scheduled loops (after loom-default, or the last pass
  of a pass list), optionally after loom-lower-affine (`loop_nest` prints any module);
- the schedule's decisions and their reasons, per source op, from the passes' remarks
  (passes/support/remarks.py): each matmul's plan with its tiles set against the cache sizes
  and the vector registers (passes/support/target.py), what was peeled, tiled, packed,
  vectorized, unroll-jammed, kept in registers, prefetched, run on threads or fused, and
  what a pass refused and why;
- the data movement the cost model estimates per memory level
  (passes/analysis/cost_model.py, `MatmulPlan.traffic`);
- the measured GFLOP/s on the arrays given (random ones when none are), the median of
  several calls, against the machine's FMA peak on as many threads (compiler/measure/peak.py).

In the loop nests, `a[i, j:+16]` is 16 consecutive elements from `a[i, j]` (a vector),
`bcast(x)` a scalar broadcast to a vector, `vectorized` a loop whose iterations are the
lanes of its vectors (its step is their width), `parallel` a loop run on threads, and
`unrolled xN:` N statements of one shape (the copies unrolling made), with the offsets
that differ between them in braces: `c[i + {0..7}, j + {0,16,32}:+16]`.
"""

from __future__ import annotations

import linecache
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects import affine, func
from xdsl.dialects.builtin import (
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    TensorType,
    VectorType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)

from passes.support.diagnostics import LoomError

if TYPE_CHECKING:
    from compiler.jit.kernel import Kernel
    from passes.analysis.cost_model import MatmulPlan

# --------------------------------------------------------------------------------------
# Index expressions: linear forms over the names of values, with the constant marked
# --------------------------------------------------------------------------------------

# A statement's text marks each subscript's constant term, so that statements that differ
# only in those (the copies of an unrolled body) fold into one line: _SLOT + value + _END
# after other terms (` + 3`), _ALONE + value + _END for a subscript that is a constant.
_SLOT, _ALONE, _END = "\x00", "\x01", "\x02"
# the names of loop-carried values (c_acc, c_acc_1, ...) between _NAME and _NAME_END: a
# folded line shows their common stem
_NAME, _NAME_END = "\x03", "\x04"
_MARK = re.compile("([\x00\x01])(-?\\d+)\x02")
_NAMED = re.compile("\x03([^\x04]*?)(?:_\\d+)?\x04")
_NAMED_FULL = re.compile("\x03([^\x04]*)\x04")
#: the longest expression printed in full, and the longest line
_MAX_EXPR = 2000
_MAX_LINE = 400


@dataclass
class _Linear:
    """`const + sum(coeff * term)` with terms named by their text (an SSA value's name,
    or a floordiv/mod that is not linear)."""

    terms: dict[str, int] = field(default_factory=dict)
    const: int = 0

    def __add__(self, other: _Linear) -> _Linear:
        terms = dict(self.terms)
        for t, c in other.terms.items():
            terms[t] = terms.get(t, 0) + c
        return _Linear(terms, self.const + other.const)

    def scaled(self, k: int) -> _Linear:
        return _Linear({t: c * k for t, c in self.terms.items()}, self.const * k)

    @property
    def is_constant(self) -> bool:
        return not any(self.terms.values())

    def text(self, slot: bool = True) -> str:
        """`i + j*8 - k` and the constant (marked when `slot`, see _SLOT)."""
        parts = []
        for t, c in self.terms.items():
            if c == 0:
                continue
            atom = f"({t})" if " " in t and (parts or c != 1) else t
            body = atom if abs(c) == 1 else f"{atom}*{abs(c)}"
            parts.append(("-" if c < 0 else "") + body if not parts else (" - " if c < 0 else " + ") + body)
        if not parts:
            return f"{_ALONE}{self.const}{_END}" if slot else str(self.const)
        if slot:
            return "".join(parts) + f"{_SLOT}{self.const}{_END}"
        return "".join(parts) + (f" + {self.const}" if self.const > 0 else f" - {-self.const}" if self.const else "")


def _const_text(values: Sequence[int], alone: bool) -> str:
    """A subscript's constant term over the statements of a folded line."""
    distinct = sorted(set(values))
    if len(distinct) == 1:
        v = distinct[0]
        return str(v) if alone else (f" + {v}" if v > 0 else f" - {-v}" if v else "")
    steps = {b - a for a, b in zip(distinct, distinct[1:])}
    if len(distinct) <= 4:
        text = "{" + ",".join(map(str, distinct)) + "}"
    elif len(steps) == 1:
        step = steps.pop()
        text = f"{{{distinct[0]}..{distinct[-1]}{'' if step == 1 else f' step {step}'}}}"
    else:
        text = "{" + ",".join(map(str, distinct[:3])) + ",...}"
    return text if alone else f" + {text}"


def _finish(template: str, group: Sequence[str]) -> str:
    """The text of a line that stands for `group` (statements of one template): each
    marked constant as it is, or the set of values it takes; the loop-carried names as
    they are (one statement) or their stem."""
    columns = list(zip(*[[int(m.group(2)) for m in _MARK.finditer(s)] for s in group]))
    kinds = [m.group(1) for m in _MARK.finditer(group[0])]
    pieces = iter([_const_text(col, kind == _ALONE) for col, kind in zip(columns, kinds)])
    text = _MARK.sub(lambda _m: next(pieces), group[0])
    return (_NAMED_FULL if len(group) == 1 else _NAMED).sub(lambda m: m.group(1), text)


def _template(statement: str) -> str:
    return _NAMED.sub(lambda m: _NAME + m.group(1) + _NAME_END, _MARK.sub(lambda m: m.group(1), statement))


# --------------------------------------------------------------------------------------
# The loop-nest printer
# --------------------------------------------------------------------------------------

_BINARY = {"arith.addf": "+", "arith.addi": "+", "arith.subf": "-", "arith.subi": "-", "arith.mulf": "*",
           "arith.muli": "*", "arith.divf": "/", "arith.divsi": "/", "arith.divui": "/",
           "arith.floordivsi": "floordiv", "arith.ceildivsi": "ceildiv", "arith.remsi": "mod", "arith.remui": "mod",
           "arith.remf": "mod", "arith.andi": "&", "arith.ori": "|", "arith.xori": "^"}
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "floordiv": 2, "ceildiv": 2, "mod": 2, "&": 0, "|": 0, "^": 0}
_CALLS = {"arith.maximumf": "max", "arith.maxnumf": "max", "arith.minimumf": "min", "arith.minnumf": "min",
          "arith.maxsi": "max", "arith.minsi": "min", "arith.negf": "-"}
_PREDICATES = {0: "false", 1: "==", 2: ">", 3: ">=", 4: "<", 5: "<=", 6: "!=", 7: "ord", 8: "==", 9: ">",
               10: ">=", 11: "<", 12: "<=", 13: "!=", 14: "uno", 15: "true"}
_IPREDICATES = {0: "==", 1: "!=", 2: "<", 3: "<=", 4: ">", 5: ">=", 6: "<", 7: "<=", 8: ">", 9: ">="}
#: ops that read memory: a value one of them loads is named where it is loaded when it is
#: used in a nested loop (a hoisted load), else printed where it is used
_READS = {"affine.load", "affine.vector_load", "memref.load", "vector.load", "vector.maskedload"}
_STORES = {"affine.store", "affine.vector_store", "memref.store", "vector.store", "vector.maskedstore"}
_LOOPS = {"affine.for", "scf.for"}
_PARALLEL = {"affine.parallel", "scf.parallel"}
_TERMINATORS = {"affine.yield", "scf.yield", "scf.reduce", "func.return"}


def type_text(t: Attribute) -> str:
    """`f32[128x256]` for a tensor or memref (`(strided)` when its layout is not the
    identity), `f32x16` for a vector."""
    if isinstance(t, TensorType | MemRefType):
        shape = "x".join("?" if n < 0 else str(n) for n in t.get_shape())
        strided = isinstance(t, MemRefType) and "strided" in str(t.layout)
        return f"{t.get_element_type()}[{shape}]" + (" (strided)" if strided else "")
    if isinstance(t, VectorType):
        return f"{t.get_element_type()}x{'x'.join(map(str, t.get_shape()))}"
    return str(t)


def _number(attr: Attribute) -> str:
    if isinstance(attr, FloatAttr):
        v = attr.value.data
        return repr(float(v)) if v == v and abs(v) != float("inf") else str(v)
    if isinstance(attr, IntegerAttr):
        return str(attr.value.data)
    if isinstance(attr, DenseIntOrFPElementsAttr):
        values = attr.get_values()
        if len(set(values)) == 1:
            v = values[0]
            return repr(float(v)) if isinstance(v, float) else str(v)
    return str(attr)


def _attribute_text(attr: Attribute) -> str:
    if isinstance(attr, DenseArrayBase):
        return "[" + ", ".join(str(v) for v in attr.get_values()) + "]"
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, IntegerAttr | FloatAttr):
        return _number(attr)
    return str(attr)


class _FunctionPrinter:
    """The pseudo-code of one function. Values are named by their SSA names (generated
    ones where the IR has none: `l0` for a loop, `t0` for others); expressions are printed
    where they are used, except loads used inside nested loops (hoisted: named where they
    are loaded) and buffers (named where they are made)."""

    def __init__(self, fn: func.FuncOp):
        self.fn = fn
        self.names: dict[SSAValue, str] = {}
        self.taken = {v.name_hint for op in fn.walk() for v in self._defined(op) if v.name_hint}
        self.used: set[str] = set()
        self.counters = {"l": 0, "t": 0}
        self.memo: dict[SSAValue, str] = {}
        self.carried: set[SSAValue] = set()  # iter_args and loop results: names that fold

    @staticmethod
    def _defined(op: Operation):
        yield from op.results
        for region in op.regions:
            for block in region.blocks:
                yield from block.args

    def name(self, value: SSAValue, kind: str = "t") -> str:
        if value not in self.names:
            hint = value.name_hint
            if hint:  # xDSL's parser drops the _N that told two values of one hint apart
                name, n = hint, 0
                while name in self.used:
                    n += 1
                    name = f"{hint}_{n}"
            else:
                while True:
                    name = f"{kind}{self.counters[kind]}"
                    self.counters[kind] += 1
                    if name not in self.taken:
                        break
            self.used.add(name)
            self.names[value] = name
        name = self.names[value]
        return f"{_NAME}{name}{_NAME_END}" if value in self.carried else name

    # ---- expressions

    def linear(self, value: SSAValue) -> _Linear:
        """An index value as a linear form (constants folded, affine.apply and the index
        arithmetic of lowered code expanded)."""
        op = value.owner
        if isinstance(op, Operation):
            if op.name == "arith.constant" and isinstance(op.properties.get("value"), IntegerAttr):
                return _Linear(const=op.properties["value"].value.data)
            if isinstance(op, affine.ApplyOp) and len(op.map.data.results) == 1:
                return self.map_linear(op.map.data, op.mapOperands)[0]
            if op.name in ("arith.index_cast", "arith.index_castui") and len(op.operands) == 1:
                return self.linear(op.operands[0])
            if op.name in ("arith.addi", "arith.subi"):
                a, b = self.linear(op.operands[0]), self.linear(op.operands[1])
                return a + (b if op.name == "arith.addi" else b.scaled(-1))
            if op.name == "arith.muli":
                a, b = self.linear(op.operands[0]), self.linear(op.operands[1])
                if a.is_constant or b.is_constant:
                    return b.scaled(a.const) if a.is_constant else a.scaled(b.const)
        return _Linear({self.expr(value, slot=False): 1})

    def map_linear(self, m: AffineMap, operands: Sequence[SSAValue]) -> list[_Linear]:
        values = [self.linear(v) for v in operands]

        def form(expr: AffineExpr) -> _Linear:
            match expr:
                case AffineConstantExpr(value=c):
                    return _Linear(const=c)
                case AffineDimExpr(position=p):
                    return values[p]
                case AffineSymExpr(position=p):
                    return values[m.num_dims + p]
                case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
                    a, b = form(lhs), form(rhs)
                    if kind == AffineBinaryOpKind.Add:
                        return a + b
                    if kind == AffineBinaryOpKind.Mul and (a.is_constant or b.is_constant):
                        return b.scaled(a.const) if a.is_constant else a.scaled(b.const)
                    if a.is_constant and b.is_constant and b.const > 0:
                        x, y = a.const, b.const
                        folded = {AffineBinaryOpKind.FloorDiv: x // y, AffineBinaryOpKind.CeilDiv: -(-x // y),
                                  AffineBinaryOpKind.Mod: x % y}
                        return _Linear(const=folded.get(kind, 0))
                    left, right = a.text(slot=False), b.text(slot=False)
                    left = f"({left})" if " " in left else left
                    right = f"({right})" if " " in right else right
                    return _Linear({f"{left} {kind.get_token()} {right}": 1})
            return _Linear({str(expr): 1})

        return [form(e) for e in m.results]

    def subscripts(self, op: Operation) -> tuple[SSAValue, list[_Linear]]:
        """The buffer an access reads or writes, and its subscripts."""
        if isinstance(op, affine.LoadOp | affine.StoreOp | affine.VectorLoadOp | affine.VectorStoreOp):
            return op.memref, self.map_linear(op.map.data, op.indices)
        buffer = next(v for v in op.operands if isinstance(v.type, MemRefType))
        first = list(op.operands).index(buffer) + 1
        rank = buffer.type.get_num_dims()
        return buffer, [self.linear(v) for v in op.operands[first:first + rank]]

    def access(self, op: Operation, vector: VectorType | None = None) -> str:
        """`a[i, j:+16]`: the buffer and subscripts of a load or store."""
        buffer, indices = self.subscripts(op)
        parts = [s.text() for s in indices]
        if vector is not None and parts:
            parts[-1] += f":+{vector.get_shape()[-1]}"
        masked = " masked" if "masked" in op.name else ""
        return f"{self.name(buffer)}[{', '.join(parts)}{masked}]"

    def expr(self, value: SSAValue, slot: bool = True) -> str:
        if value in self.names or not isinstance(value.owner, Operation):
            return self.name(value, "l" if isinstance(value.owner, Block) and value.index == 0 else "t")
        key = value
        if slot and key in self.memo:
            return self.memo[key]
        text = self._expr(value.owner, value)
        if len(text) > _MAX_EXPR:  # (an expression DAG can grow exponentially in print)
            text = _MARK.sub(lambda m: m.group(2), _NAMED_FULL.sub(lambda m: m.group(1), text))[:_MAX_EXPR] + "..."
        if not slot:
            text = _MARK.sub(lambda m: m.group(2) if m.group(1) == _ALONE else
                             (f" + {m.group(2)}" if int(m.group(2)) > 0 else
                              f" - {m.group(2)[1:]}" if int(m.group(2)) < 0 else ""), text)
        else:
            self.memo[key] = text
        return text

    def _operand(self, value: SSAValue, least: int) -> str:
        """An operand's text, in parentheses when it binds less tightly than `least`."""
        text = self.expr(value)
        op = value.owner
        precedence = 3
        if isinstance(op, Operation):
            if op.name in _BINARY:
                precedence = _PRECEDENCE[_BINARY[op.name]]
            elif op.name in ("vector.fma", "math.fma"):
                precedence = 1
            elif op.name in ("arith.select", "arith.cmpf", "arith.cmpi"):
                precedence = -1
            elif isinstance(op, affine.ApplyOp) or op.name in ("arith.addi", "arith.subi"):
                precedence = 1
        return f"({text})" if precedence < least else text

    def _expr(self, op: Operation, value: SSAValue) -> str:
        name = op.name
        operands = op.operands
        if name == "arith.constant":
            return _number(op.properties["value"])
        if name in _READS:
            return self.access(op, value.type if isinstance(value.type, VectorType) else None)
        if isinstance(op, affine.ApplyOp) or (name in ("arith.addi", "arith.subi", "arith.muli")
                                              and not isinstance(value.type, VectorType)):
            return self.linear(value).text()
        if name in ("arith.index_cast", "arith.index_castui", "arith.extf", "arith.truncf", "arith.sitofp",
                    "arith.uitofp", "arith.fptosi"):
            return self.expr(operands[0])
        if name in _BINARY:
            symbol = _BINARY[name]
            precedence = _PRECEDENCE[symbol]
            return f"{self._operand(operands[0], precedence)} {symbol} {self._operand(operands[1], precedence + 1)}"
        if name in ("vector.fma", "math.fma"):
            return f"{self._product(operands[0], operands[1])} + {self._operand(operands[2], 1)}"
        if name == "vector.broadcast":
            return f"bcast({self.expr(operands[0])})"
        if name in ("arith.cmpf", "arith.cmpi"):
            table = _PREDICATES if name == "arith.cmpf" else _IPREDICATES
            symbol = table.get(op.properties["predicate"].value.data, "?")
            return f"{self._operand(operands[0], 0)} {symbol} {self._operand(operands[1], 0)}"
        if name == "arith.select":
            return self._select(op)
        if name in _CALLS:
            return f"{_CALLS[name]}({', '.join(self.expr(v) for v in operands)})"
        if name == "vector.create_mask":
            return f"mask({', '.join(self.expr(v) for v in operands)})"
        if name in ("affine.min", "affine.max"):
            forms = self.map_linear(op.map.data, operands)
            return f"{name[7:]}({', '.join(f.text() for f in forms)})"
        if name in _LOOPS:  # a loop's result: the value carried in its iter_arg
            return self.name(op.regions[0].block.args[1 + value.index])
        return self.name(value)  # a value of an op printed as a statement of its own

    def _product(self, a: SSAValue, b: SSAValue) -> str:
        return f"{self._operand(a, 2)} * {self._operand(b, 3)}"

    def _select(self, op: Operation) -> str:
        cond, a, b = op.operands
        test = cond.owner
        if isinstance(test, Operation) and test.name in ("arith.cmpf", "arith.cmpi") and len(list(cond.uses)) == 1:
            predicate = (_PREDICATES if test.name == "arith.cmpf" else _IPREDICATES).get(
                test.properties["predicate"].value.data)
            x, y = test.operands
            if (x, y) == (a, b) and predicate in (">", ">="):
                return f"max({self.expr(a)}, {self.expr(b)})"
            if (x, y) == (a, b) and predicate in ("<", "<="):
                return f"min({self.expr(a)}, {self.expr(b)})"
        return f"{self._operand(cond, 0)} ? {self._operand(a, 0)} : {self._operand(b, 0)}"

    # ---- statements

    def render(self) -> list[str]:
        fn = self.fn
        args = ", ".join(f"{self.name(a)}: {type_text(a.type)}" for a in fn.body.block.args)
        outputs = fn.function_type.outputs.data
        result = f" -> {', '.join(type_text(t) for t in outputs)}" if outputs else ""
        return [f"func @{fn.sym_name.data}({args}){result}:", *self.block(fn.body.block, 1)]

    def block(self, block: Block, depth: int) -> list[str]:
        """The block's statements: loops and conditionals as headers over their bodies,
        runs of other statements folded by template (`unrolled xN:`)."""
        lines: list[str] = []
        run: list[str] = []
        for op in block.ops:
            nested = self.nested(op, depth)
            if nested is None:
                run += self.statements(op)
                continue
            lines += self._fold(run, depth)
            run = []
            lines += nested
        return lines + self._fold(run, depth)

    @staticmethod
    def _fold(run: list[str], depth: int) -> list[str]:
        groups: dict[str, list[str]] = {}
        for statement in run:
            groups.setdefault(_template(statement), []).append(statement)
        pad = "  " * depth
        return [_clip(pad + (f"unrolled x{len(g)}: " if len(g) > 1 else "") + _finish(t, g)) for t, g in groups.items()]

    def nested(self, op: Operation, depth: int) -> list[str] | None:
        """Lines for an op with regions (a loop, a conditional), None for another op."""
        pad = "  " * depth
        if op.name in _LOOPS:
            body = op.regions[0].block
            carried = list(body.args[1:])
            self.carried.update(carried)
            self.carried.update(op.results)
            inits = [f"{self.name(a)} = {self.expr(v)}" for a, v in zip(carried, self._inits(op))]
            head, comment = self.loop_header(op)
            if carried:
                stems = {}
                for a in carried:
                    stem = _NAMED.sub(lambda m: m.group(1), self.name(a))
                    stems[stem] = stems.get(stem, 0) + 1
                head += ", carrying " + ", ".join(f"{s}" + (f" x{n}" if n > 1 else "") for s, n in stems.items())
            return [*self._fold(inits, depth), f"{pad}{head}:{comment}", *self.block(body, depth + 1)]
        if op.name in _PARALLEL:
            return [f"{pad}{self.parallel_header(op)}:", *self.block(op.regions[0].block, depth + 1)]
        if op.name in ("affine.if", "scf.if"):
            lines = [f"{pad}if {self.condition(op)}:", *self.block(op.regions[0].block, depth + 1)]
            if op.regions[1].blocks and any(o.name not in _TERMINATORS or o.operands for o in op.regions[1].block.ops):
                lines += [f"{pad}else:", *self.block(op.regions[1].block, depth + 1)]
            return lines
        if op.regions and not isinstance(op, func.FuncOp):
            return [f"{pad}{op.name}:", *(line for r in op.regions for b in r.blocks
                                          for line in self.block(b, depth + 1))]
        return None

    @staticmethod
    def _inits(op: Operation) -> Sequence[SSAValue]:
        return op.inits if isinstance(op, affine.ForOp) else op.operands[3:]

    def loop_header(self, op: Operation) -> tuple[str, str]:
        """`for i in 0..128 step 8` (or `vectorized ...`), and the nest's tag as a comment."""
        iv = op.regions[0].block.args[0]
        name = self.name(iv, "l")
        if isinstance(op, affine.ForOp):
            lows = self.map_linear(op.lowerBoundMap.data, op.lowerBoundOperands)
            highs = self.map_linear(op.upperBoundMap.data, op.upperBoundOperands)
            low = _bound(lows, "max")
            high = _bound(highs, "min")
            step = op.step.value.data
        else:
            low, high = self.linear(op.operands[0]).text(slot=False), self.linear(op.operands[1]).text(slot=False)
            step_form = self.linear(op.operands[2])
            step = step_form.const if step_form.is_constant else step_form.text(slot=False)
        kind = "for"
        lanes = self.vector_lanes(op)
        if lanes and lanes == step:
            kind = "vectorized"
        text = f"{kind} {name} in {low}..{high}" + (f" step {step}" if step != 1 else "")
        tag = op.attributes.get("loom.tag")
        return text, f"  # nest '{tag.data}'" if isinstance(tag, StringAttr) else ""

    def vector_lanes(self, loop: Operation) -> int | None:
        """The width of the vectors the loop's body reads or writes along the loop's
        induction variable (in their last subscript, with coefficient 1), if any."""
        iv_name = self.name(loop.regions[0].block.args[0], "l")
        stack = list(loop.regions[0].block.ops)
        while stack:
            op = stack.pop()
            if op.name in _LOOPS or op.name in _PARALLEL:
                continue
            for region in op.regions:
                for block in region.blocks:
                    stack += list(block.ops)
            if op.name not in _READS | _STORES:
                continue
            vector = next((t for t in (*(r.type for r in op.results), *(o.type for o in op.operands))
                           if isinstance(t, VectorType)), None)
            if vector is None:
                continue
            _, indices = self.subscripts(op)
            if indices and indices[-1].terms.get(iv_name) == 1:
                return vector.get_shape()[-1]
        return None

    def parallel_header(self, op: Operation) -> str:
        ivs = [self.name(a, "l") for a in op.regions[0].block.args]
        if isinstance(op, affine.ParallelOp):
            lows = self.map_linear(op.lowerBoundsMap.data, op.map_operands)
            highs = self.map_linear(op.upperBoundsMap.data, op.map_operands)
            low_groups = op.lowerBoundsGroups.get_values()
            high_groups = op.upperBoundsGroups.get_values()
            ranges = []
            li = hi = 0
            for d, step in enumerate(s.value.data for s in op.steps.data):
                low = _bound(lows[li:li + low_groups[d]], "max")
                high = _bound(highs[hi:hi + high_groups[d]], "min")
                li, hi = li + low_groups[d], hi + high_groups[d]
                ranges.append(f"{low}..{high}" + (f" step {step}" if step != 1 else ""))
        else:
            n = len(ivs)
            ranges = []
            for d in range(n):
                low, high, step = (self.linear(op.operands[d + k * n]) for k in range(3))
                step_text = step.const if step.is_constant else step.text(slot=False)
                ranges.append(f"{low.text(slot=False)}..{high.text(slot=False)}"
                              + (f" step {step_text}" if step_text != 1 else ""))
        threads = op.attributes.get("loom.num_threads")
        on = f" ({threads.value.data} threads)" if isinstance(threads, IntegerAttr) and threads.value.data else ""
        if len(ivs) == 1:
            return f"parallel {ivs[0]} in {ranges[0]}{on}"
        return f"parallel ({', '.join(ivs)}) in ({', '.join(ranges)}){on}"

    def condition(self, op: Operation) -> str:
        if isinstance(op, affine.IfOp):
            s = op.condition.data
            forms = self.map_linear(AffineMap(s.num_dims, s.num_symbols, tuple(c.lhs - c.rhs for c in s.constraints)),
                                    op.args)
            return " and ".join(f"{f.text(slot=False)} {c.kind.value} 0" for f, c in zip(forms, s.constraints))
        return self.expr(op.operands[0], slot=False)

    def statements(self, op: Operation) -> list[str]:
        """The statement lines of an op without regions (none for a value printed where
        it is used)."""
        name = op.name
        if name in _STORES:
            value = op.operands[0] if name != "vector.maskedstore" else op.operands[-1]
            target = self.access(op, value.type if isinstance(value.type, VectorType) else None)
            return [self._assign(target, value, op)]
        if name in _TERMINATORS:
            return self.yields(op)
        if name == "loom.prefetch":
            write = op.properties.get("is_write")
            return [f"prefetch {self.access(op)}" + (" for writing" if write is not None and write.value.data else "")]
        if name == "memref.alloc" or name == "memref.alloca":
            return [f"{self.name(op.results[0])} = alloc {type_text(op.results[0].type)}"]
        if name == "memref.dealloc":
            return [f"free {self.name(op.operands[0])}"]
        if name == "memref.copy":
            return [f"{self.name(op.operands[1])} = copy of {self.name(op.operands[0])}"]
        if name in ("func.call", "llvm.call"):
            callee = op.properties.get("callee") or op.attributes.get("callee")
            target = str(callee) if callee is not None else "?"
            results = ", ".join(self.name(r) for r in op.results)
            arguments = ", ".join(self.expr(v) for v in op.operands)
            return [(f"{results} = " if results else "") + f"call {target}({arguments})"]
        if name.startswith("loom."):
            return [self.loom_op(op)]
        if any(isinstance(r.type, MemRefType | TensorType) for r in op.results):
            # a view or another buffer: named where it is made
            sources = ", ".join(self.name(v) for v in op.operands if isinstance(v.type, MemRefType | TensorType))
            what = name.split(".")[-1]
            return [f"{', '.join(self.name(r) for r in op.results)} = {what} {sources} as "
                    f"{', '.join(type_text(r.type) for r in op.results)}"]
        if name in _READS and self._used_deeper(op):
            return [f"{self.name(op.results[0])} = {self._expr(op, op.results[0])}"]
        if op.results and (_pure(op) or name in _READS):
            return []  # printed where it is used
        results = ", ".join(self.name(r) for r in op.results)
        return [(f"{results} = " if results else "") + f"{name}({', '.join(self.expr(v) for v in op.operands)})"]

    @staticmethod
    def _used_deeper(op: Operation) -> bool:
        """Whether a result of `op` is used inside a region nested in its block."""
        home = op.parent_block()
        return any(use.operation.parent_block() is not home for r in op.results for use in r.uses)

    def _assign(self, target: str, value: SSAValue, store: Operation) -> str:
        """`target = expr`, or `target += x` when the value adds to what it replaces."""
        op = value.owner
        if not isinstance(op, Operation):
            return f"{target} = {self.expr(value)}"

        def reads_target(v: SSAValue) -> bool:
            loaded = v.owner
            return (isinstance(loaded, Operation) and loaded.name in _READS and self.expr(v) == target
                    and loaded.parent_block() is store.parent_block())

        if op.name in ("arith.addf", "arith.addi"):
            for mine, other in ((0, 1), (1, 0)):
                if reads_target(op.operands[mine]):
                    return f"{target} += {self.expr(op.operands[other])}"
        if op.name in ("vector.fma", "math.fma") and reads_target(op.operands[2]):
            return f"{target} += {self._product(op.operands[0], op.operands[1])}"
        return f"{target} = {self.expr(value)}"

    def yields(self, op: Operation) -> list[str]:
        """A loop body's yield: each carried value's update (`acc += a * b`)."""
        parent = op.parent_op()
        if op.name == "func.return":
            return [f"return {', '.join(self.expr(v) for v in op.operands)}"] if op.operands else []
        if parent is None or parent.name not in _LOOPS or not op.operands:
            return [f"yield {', '.join(self.expr(v) for v in op.operands)}"] if op.operands else []
        lines = []
        for arg, value in zip(parent.regions[0].block.args[1:], op.operands):
            name = self.name(arg)
            update = value.owner
            kind = update.name if isinstance(update, Operation) else ""
            if kind in ("vector.fma", "math.fma") and update.operands[2] == arg:
                lines.append(f"{name} += {self._product(update.operands[0], update.operands[1])}")
            elif kind in ("arith.addf", "arith.addi") and arg in update.operands:
                other = update.operands[1] if update.operands[0] == arg else update.operands[0]
                lines.append(f"{name} += {self.expr(other)}")
            elif value != arg:
                lines.append(f"{name} = {self.expr(value)}")
        return lines

    def loom_op(self, op: Operation) -> str:
        """`c = matmul(x, w)`: a loom op on tensors, or on memrefs (`outs` as the target)."""
        what = op.name.removeprefix("loom.")
        attrs = {**op.properties, **{k: v for k, v in op.attributes.items() if not k.startswith("loom.")}}
        options = "".join(f", {k}={_attribute_text(v)}" for k, v in attrs.items()
                          if k not in ("operandSegmentSizes", "resultSegmentSizes"))
        ins = getattr(op, "ins", None)
        outs = getattr(op, "outs", None)
        if outs:  # destination-passing form
            return f"{', '.join(self.name(v) for v in outs)} = {what}({', '.join(self.name(v) for v in ins)}{options})"
        results = ", ".join(self.name(r) for r in op.results)
        call = f"{what}({', '.join(self.name(v) for v in op.operands)}{options})"
        return f"{results} = {call}" if results else call


def _pure(op: Operation) -> bool:
    from xdsl.traits import Pure

    return op.has_trait(Pure) or op.name.startswith(("arith.", "math.", "vector.broadcast", "vector.create_mask",
                                                     "vector.fma", "affine.apply", "affine.min", "affine.max"))


def _clip(line: str) -> str:
    return line if len(line) <= _MAX_LINE else line[:_MAX_LINE] + "..."


def _bound(forms: Sequence[_Linear], combine: str) -> str:
    texts = [f.text(slot=False) for f in forms]
    return texts[0] if len(texts) == 1 else f"{combine}({', '.join(texts)})"


def loop_nest(source: str | ModuleOp) -> str:
    """Pseudo-code of a module's functions, one line per loop (see the module's
    docstring for the notation): what `explain` prints for each stage."""
    from compiler.driver import load_module

    module = load_module(source) if isinstance(source, str) else source
    lines: list[str] = []
    for op in module.ops:
        if isinstance(op, func.FuncOp) and op.body.blocks:
            lines += _FunctionPrinter(op).render()
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# The schedule's decisions, from the remarks
# --------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------

#: the stages a report shows by default; "lowered" (after loom-lower-affine) can be added
STAGES = ("input", "affine", "schedule")
_STAGE_PASSES = {"input": "input", "affine": "convert-loom-to-affine", "lowered": "loom-lower-affine"}
#: the passes of the lowering to affine loops and from them: any other pass between the two
#: is a schedule pass
_LOWERING = ("loom-bufferize", "convert-loom-to-affine", "loom-outline")


@dataclass(frozen=True)
class Measurement:
    """The kernel's measured speed on the arrays given, and the machine's peak."""

    seconds: float  # median of `calls` calls
    calls: int
    flops: int
    threads: int  # the threads its parallel loops ran on (1: it has none)
    dtype: str  # "f32" or "f64"
    peak: float | None  # GFLOP/s: the FMA peak on `threads` threads (None: not measured)
    note: str = ""

    @property
    def gflops(self) -> float:
        return self.flops / self.seconds / 1e9 if self.seconds > 0 else 0.0

    @property
    def share_of_peak(self) -> float | None:
        return self.gflops / self.peak if self.peak else None


@dataclass
class Report:
    """What `explain` found out about one kernel; `str(report)` renders it."""

    entry: str
    filename: str
    pipeline: str
    target: str
    signature: str
    stages: list[tuple[str, str]]  # (title, loop nest)
    schedule_note: str
    decisions: list[OpDecisions]
    plans: list[PlannedMatmul]
    measurement: Measurement | None
    remarks: list[str] = field(default_factory=list)
    kernel: Kernel | None = field(default=None, repr=False)

    def traffic_lines(self) -> list[str]:
        """The cost model's data movement per memory level, per matmul plan and in all."""
        if not self.plans:
            return ["no matmul was planned by the cost model: nothing estimated (elementwise nests and copies read "
                    "and write each element once)"]
        levels = list(self.plans[0].plan.traffic())
        rows = [["", *levels]]
        totals = dict.fromkeys(levels, 0.0)
        for planned in self.plans:
            p = planned.plan
            traffic = p.traffic()
            fma = p.m * p.n * p.k
            cells = [planned.name]
            for level in levels:
                elements = traffic.get(level, 0.0)
                totals[level] += elements * p.element_bytes
                per = f", {elements / fma:.3g}/fma" if fma else ""
                cells.append(f"{_count(elements)} ({_kib(elements * p.element_bytes)}{per})")
            rows.append(cells)
        if len(self.plans) > 1:
            rows.append(["all", *(_kib(totals[level]) for level in levels)])
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = [f"{r[0]:<{widths[0]}}" + "".join(f"  {c:>{w}}" for c, w in zip(r[1:], widths[1:])) for r in rows]
        lines.append("(elements of the matmul's type, then bytes and elements per multiply-add; the elementwise "
                     "nests and the copies are not modelled)")
        return lines

    def __str__(self) -> str:
        threads = self.measurement.threads if self.measurement else None
        head = f"explain @{self.entry} ({self.filename}), pipeline {self.pipeline}"
        out = [head + (f", {threads} thread{'s' * (threads != 1)}" if threads else ""),
               f"target: {self.target}", f"arrays: {self.signature}", ""]
        for title, text in self.stages:
            out += [f"== loop nest {title} ==", text, ""]
        if self.schedule_note:
            out += [self.schedule_note, ""]
        out.append("== schedule decisions ==")
        if not self.decisions:
            out.append("none: no schedule pass ran, or none said anything")
        for group in self.decisions:
            where = group.location or "the whole module"
            out.append(f"{where}" + (f": {group.source}" if group.source else ""))
            for d in group.decisions:
                first = f"  {d.label:<15} "
                out += textwrap.wrap(d.text, 118, initial_indent=first, subsequent_indent=" " * len(first),
                                     break_on_hyphens=False) or [first]
                for detail in d.details:
                    out += _wrap(detail, 118, " " * (len(first) + 2), " " * (len(first) + 4))
        out += ["", "== estimated data movement (cost model) ==", *self.traffic_lines(), "", "== measured =="]
        m = self.measurement
        if m is None:
            out.append("not measured")
        else:
            how = f"the median of {m.calls} calls" if m.calls else "the median measured above"
            out.append(f"{m.seconds * 1e3:.4g} ms, {how}, on {m.threads} thread" + "s" * (m.threads != 1))
            if not m.flops:
                out.append("no floating-point work: no GFLOP/s")
            elif m.peak:
                out.append(f"{m.gflops:.2f} GFLOP/s = {m.share_of_peak:.0%} of the machine's {m.dtype} FMA peak on "
                           f"{m.threads} thread{'s' * (m.threads != 1)} ({m.peak:.1f} GFLOP/s, measured once per "
                           "machine: compiler/measure/peak.py)")
            else:
                out.append(f"{m.gflops:.2f} GFLOP/s")
            if m.note:
                out.append(m.note)
        return "\n".join(out)


def _wrap(text: str, width: int, indent: str, more: str) -> list[str]:
    """`text` in lines of at most `width` (where its words allow): a pass list breaks
    between its passes, anything else between words."""
    if not text.startswith("pass list: "):
        return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=more, break_on_hyphens=False)
    lines, line = [], indent + "pass list: "
    items = _split_top(text.removeprefix("pass list: ").replace("{", "[").replace("}", "]"))
    for i, item in enumerate(items):
        item = item.replace("[", "{").replace("]", "}") + ("," if i < len(items) - 1 else "")
        if len(line) + len(item) > width and line.strip() != "pass list:":
            lines.append(line.rstrip())
            line = more
        line += item
    return [*lines, line]


def _count(n: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return f"{n:.3g}"


def _stage_list(kernel: Kernel, wanted: Sequence[str]) -> tuple[list[tuple[str, str]], str]:
    """The (title, loop nest) of each stage wanted, and a note when there is no schedule."""
    names = list(kernel.stages)
    if "loom-lower-affine" in names:
        lowering = names.index("loom-lower-affine")
    else:
        lowering = len(names)
    schedule = [n for n in names[:lowering] if n != "input" and n.split("#")[0] not in _LOWERING]
    out: list[tuple[str, str]] = []
    note = ""
    for stage in wanted:
        if stage not in (*STAGES, "lowered"):
            raise ValueError(f"unknown stage {stage!r}: the stages are {', '.join((*STAGES, 'lowered'))}")
        if stage == "schedule":
            if not schedule:
                note = (f"no schedule: the pipeline '{kernel.pipeline}' runs no schedule pass, so the loops above "
                        "run as written (pipeline='default' schedules them for this machine)")
                continue
            last = schedule[-1]
            passes = ", ".join(n.split("#")[0] for n in schedule)
            title = f"after {last} (the schedule)" if len(schedule) == 1 else f"after the schedule ({passes})"
            out.append((title, loop_nest(kernel.stages[last])))
            continue
        name = _STAGE_PASSES[stage]
        if name in kernel.stages:
            what = {"input": "input (the loom ops)", "affine": "after convert-loom-to-affine (the textbook loops)",
                    "lowered": "after loom-lower-affine (scf loops)"}[stage]
            out.append((what, loop_nest(kernel.stages[name])))
    return out, note


def _signature(kernel: Kernel) -> str:
    ins = ", ".join(s.short() for s in kernel.inputs)
    outs = ", ".join(s.short() for s in kernel.outputs)
    return f"{ins or 'none'}" + (f" -> {outs}" if outs else "")


def measure(kernel: Kernel, arrays: Sequence[np.ndarray], *, budget: float = 0.5) -> Measurement:
    """The kernel's median time on `arrays` (as many calls as fit `budget` seconds, at
    least 3), with the threads it runs on and the machine's peak on as many."""
    from compiler.measure.runner import timed_rounds

    def call():
        kernel(*arrays)

    call()  # the arrays are checked here, before any timing
    timing = timed_rounds([call], budget=budget, at_most=1000)
    return _measurement(kernel, timing.median(), timing.runs)


def _measurement(kernel: Kernel, seconds: float, calls: int) -> Measurement:
    """`seconds` (the median of `calls` calls; 0 calls: a time measured elsewhere) set
    against the FMA peak on the threads the kernel runs on: its parallel loops' count, or
    1 when it has none."""
    from compiler.measure.peak import peak_gflops
    from passes.support.target import host

    parallel = "GOMP_parallel" in kernel.llvm_ir
    threads = (kernel.num_threads or host().threads) if parallel else 1
    spec = (kernel.outputs or kernel.inputs or [None])[0]
    dtype = "f64" if spec is not None and spec.dtype == np.float64 else "f32"
    note = "" if parallel else "(no loop of this kernel runs on threads)"
    peak = None
    try:
        peak = peak_gflops(dtype, threads)
    except LoomError as e:
        note = f"the FMA peak was not measured: {e.message}"
    return Measurement(seconds, calls, kernel.flops, threads, dtype, peak, note)


def explain_source(
    source: str | ModuleOp,
    *arrays: np.ndarray,
    entry: str | None = None,
    pipeline: str = "default",
    num_threads: int | None = None,
    filename: str = "<source>",
    stages: Sequence[str] = STAGES,
    measure_time: bool = True,
    seconds: float | None = None,
    budget: float = 0.5,
    seed: int = 0,
) -> Report:
    """Compile `source` (loom-dialect MLIR text or a module) as `compile()` would, with
    its remarks and the IR after each pass, and report on it (see the module's
    docstring). `arrays` are the kernel's arguments for the measurement (standard normal
    ones, seeded by `seed`, when none are given); `measure_time=False` leaves it out, and
    `seconds` gives a time measured elsewhere (loom-run's). `stages` picks the loop
    nests shown: `input`, `affine`, `schedule`, `lowered`."""
    from compiler.driver import compile, load_module
    from compiler.measure.runner import random_inputs
    from passes.support.target import host

    kernel = compile(source, entry=entry, pipeline=pipeline, num_threads=num_threads, remarks=True, stages=True,
                     filename=filename)
    if "input" not in kernel.stages:
        raise LoomError("the kernel was compiled without its stages (compile(stages=True)): nothing to explain")
    shown, note = _stage_list(kernel, stages)
    schedule = [n for n in kernel.stages if n.split("#")[0] == "loom-default"]
    scheduled = load_module(kernel.stages[schedule[-1]]) if schedule else None
    text = source if isinstance(source, str) else ""
    decisions, plans = schedule_decisions(kernel.remarks, host(), source=text, filename=filename, scheduled=scheduled)
    measurement = None
    if seconds is not None or measure_time:
        if seconds is not None:
            measurement = _measurement(kernel, seconds, 0)
        else:
            inputs = list(arrays) if arrays else random_inputs(kernel.inputs, seed)
            measurement = measure(kernel, inputs, budget=budget)
    return Report(kernel.entry, filename, pipeline, host().describe(), _signature(kernel), shown, note, decisions,
                  plans, measurement, list(kernel.remarks), kernel)


def explain(target, *args, **options) -> Report:
    """The report on a kernel (see the module's docstring): `target` is a `@compiler.jit`
    function (called with `args`, its arguments), loom-dialect MLIR text or a module (with
    `args` the arrays to time it on), or a Kernel compiled with `stages=True`. `options`
    go to `explain_source` (`pipeline=`, `num_threads=`, `entry=`, `stages=`, ...; a
    @compiler.jit function's own pipeline and threads by default)."""
    from compiler.jit.kernel import Kernel

    if type(target).__module__.split(".")[0] == "torch" or type(target).__module__ == "compiler.frontends.torch_fx":
        from compiler.frontends.torch_fx import explain_torch  # a torch.compile'd model, a from_torch program

        return explain_torch(target, *args, **options)
    if hasattr(target, "specialize") and hasattr(target, "fn"):  # a @compiler.jit function
        spec = target.specialize(*args)
        options.setdefault("pipeline", target.pipeline)
        options.setdefault("num_threads", target.num_threads)
        options.setdefault("filename", f"<loom.jit {getattr(target.fn, '__qualname__', 'function')}>")
        return explain_source(spec.source, *spec.inputs(args), **options)
    if isinstance(target, Kernel):
        if "input" not in target.stages:
            raise TypeError("explain() needs the kernel's source: pass the MLIR text, or a Kernel compiled with "
                            "stages=True")
        options.setdefault("pipeline", target.pipeline)
        options.setdefault("num_threads", target.num_threads)
        options.setdefault("entry", target.entry)
        return explain_source(target.stages["input"], *args, **options)
    if isinstance(target, str | ModuleOp):
        return explain_source(target, *args, **options)
    raise TypeError(f"explain() takes a @compiler.jit function, MLIR text, a module or a Kernel, "
                    f"got {type(target).__name__}")

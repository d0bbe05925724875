"""Loop nests as pseudo-code, one line per loop (Halide's `print_loop_nest`): what
`compiler.explain` prints for each stage of a kernel, and `loop_nest` prints for any module.

In the loop nests, `a[i, j:+16]` is 16 consecutive elements from `a[i, j]` (a vector),
`bcast(x)` a scalar broadcast to a vector, `vectorized` a loop whose iterations are the
lanes of its vectors (its step is their width), `parallel` a loop run on threads, and
`unrolled xN:` N statements of one shape (the copies unrolling made), with the offsets
that differ between them in braces: `c[i + {0..7}, j + {0,16,32}:+16]`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import affine, func, memref, vector
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
from xdsl.ir.affine import AffineBinaryOpExpr, AffineMap
from xdsl.traits import Pure

from compiler.build import load_module
from passes.analysis.affine_forms import LinearForm, expr_form
from passes.analysis.loop_utils import AFFINE_ACCESSES, LOADS, STORES

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


@dataclass(frozen=True)
class _Term:
    """A part of an index expression that is not linear (`i floordiv 2`, a product of two
    values), a term of a linear form by its text: two with one text are one term."""

    text: str


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
#: (the nests' loads and stores, and the memref and vector ones lowering makes of them)
_READS = {op.name for op in (*LOADS, memref.LoadOp, vector.LoadOp)}
_STORES = {op.name for op in (*STORES, memref.StoreOp, vector.StoreOp)}
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

    def linear(self, value: SSAValue) -> LinearForm:
        """An index value as a linear form (passes/analysis/affine_forms.py: constants
        folded, affine.apply and the index arithmetic of lowered code expanded)."""
        op = value.owner
        if isinstance(op, Operation):
            if op.name == "arith.constant" and isinstance(op.properties.get("value"), IntegerAttr):
                return LinearForm(const=op.properties["value"].value.data)
            if isinstance(op, affine.ApplyOp) and len(op.map.data.results) == 1:
                return self.map_linear(op.map.data, op.mapOperands)[0]
            if op.name in ("arith.index_cast", "arith.index_castui") and len(op.operands) == 1:
                return self.linear(op.operands[0])
            if op.name in ("arith.addi", "arith.subi"):
                a, b = self.linear(op.operands[0]), self.linear(op.operands[1])
                return a + b if op.name == "arith.addi" else a - b
            if op.name == "arith.muli":
                a, b = self.linear(op.operands[0]), self.linear(op.operands[1])
                if not a.coeffs or not b.coeffs:
                    return b * a.const if not a.coeffs else a * b.const
        return LinearForm.of(value)

    def map_linear(self, m: AffineMap, operands: Sequence[SSAValue]) -> list[LinearForm]:
        """The results of `m` applied to `operands` as linear forms, a part that is not
        linear a term of its own (`_Term`)."""
        values = [self.linear(v) for v in operands]
        forms = [expr_form(e, values, m.num_dims, self._nonlinear) for e in m.results]
        assert all(f is not None for f in forms), "_nonlinear gives every part a form"
        return forms  # type: ignore[return-value]

    def _nonlinear(self, expr: AffineBinaryOpExpr, a: LinearForm, b: LinearForm) -> LinearForm:
        left, right = self.form_text(a, slot=False), self.form_text(b, slot=False)
        left = f"({left})" if " " in left else left
        right = f"({right})" if " " in right else right
        return LinearForm({_Term(f"{left} {expr.kind.get_token()} {right}"): 1})  # type: ignore[dict-item]

    def form_text(self, form: LinearForm, slot: bool = True) -> str:
        """`i + j*8 - k` and the constant (marked when `slot`, see _SLOT)."""
        parts = []
        for term, c in form.coeffs.items():
            t = term.text if isinstance(term, _Term) else self.expr(term, slot=False)
            atom = f"({t})" if " " in t and (parts or c != 1) else t
            body = atom if abs(c) == 1 else f"{atom}*{abs(c)}"
            parts.append(("-" if c < 0 else "") + body if not parts else (" - " if c < 0 else " + ") + body)
        if not parts:
            return f"{_ALONE}{form.const}{_END}" if slot else str(form.const)
        if slot:
            return "".join(parts) + f"{_SLOT}{form.const}{_END}"
        return "".join(parts) + (f" + {form.const}" if form.const > 0 else f" - {-form.const}" if form.const else "")

    def bound(self, forms: Sequence[LinearForm], combine: str) -> str:
        """A loop bound: one form, or the max or min (`combine`) of several."""
        texts = [self.form_text(f, slot=False) for f in forms]
        return texts[0] if len(texts) == 1 else f"{combine}({', '.join(texts)})"

    def subscripts(self, op: Operation) -> tuple[SSAValue, list[LinearForm]]:
        """The buffer an access reads or writes, and its subscripts."""
        if isinstance(op, AFFINE_ACCESSES):
            return op.memref, self.map_linear(op.map.data, op.indices)
        buffer = next(v for v in op.operands if isinstance(v.type, MemRefType))
        first = list(op.operands).index(buffer) + 1
        rank = buffer.type.get_num_dims()
        return buffer, [self.linear(v) for v in op.operands[first:first + rank]]

    def access(self, op: Operation, vector: VectorType | None = None) -> str:
        """`a[i, j:+16]`: the buffer and subscripts of a load or store."""
        buffer, indices = self.subscripts(op)
        parts = [self.form_text(s) for s in indices]
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
            return self.form_text(self.linear(value))
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
            return f"{name[7:]}({', '.join(self.form_text(f) for f in forms)})"
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
            low = self.bound(lows, "max")
            high = self.bound(highs, "min")
            step = op.step.value.data
        else:
            low, high = (self.form_text(self.linear(v), slot=False) for v in op.operands[:2])
            step_form = self.linear(op.operands[2])
            step = step_form.const if not step_form.coeffs else self.form_text(step_form, slot=False)
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
        iv = loop.regions[0].block.args[0]
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
            if indices and indices[-1].coeff(iv) == 1:
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
                low = self.bound(lows[li:li + low_groups[d]], "max")
                high = self.bound(highs[hi:hi + high_groups[d]], "min")
                li, hi = li + low_groups[d], hi + high_groups[d]
                ranges.append(f"{low}..{high}" + (f" step {step}" if step != 1 else ""))
        else:
            n = len(ivs)
            ranges = []
            for d in range(n):
                low, high, step = (self.linear(op.operands[d + k * n]) for k in range(3))
                step_text = step.const if not step.coeffs else self.form_text(step, slot=False)
                ranges.append(f"{self.form_text(low, slot=False)}..{self.form_text(high, slot=False)}"
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
            return " and ".join(f"{self.form_text(f, slot=False)} {c.kind.value} 0" for f, c in zip(forms, s.constraints))
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
    return op.has_trait(Pure) or op.name.startswith(("arith.", "math.", "vector.broadcast", "vector.create_mask",
                                                     "vector.fma", "affine.apply", "affine.min", "affine.max"))


def _clip(line: str) -> str:
    return line if len(line) <= _MAX_LINE else line[:_MAX_LINE] + "..."


def loop_nest(source: str | ModuleOp) -> str:
    """Pseudo-code of a module's functions, one line per loop (see the module's
    docstring for the notation): what `explain` prints for each stage."""
    module = load_module(source) if isinstance(source, str) else source
    lines: list[str] = []
    for op in module.ops:
        if isinstance(op, func.FuncOp) and op.body.blocks:
            lines += _FunctionPrinter(op).render()
    return "\n".join(lines)

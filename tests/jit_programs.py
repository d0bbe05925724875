"""Random `@loom.jit` programs for the differential fuzzer (tests/test_jit_fuzz.py).

A program is Python source: a function of one to three arrays and a float, a few lines
of views (slices with any steps, integer indices, `None` and `...`, `.T`, `.transpose`,
`.reshape`, `broadcast_to`, `contiguous`) and operations (`@`, `+`, `-`, `*`, `relu`,
`clamp` of floats, unary `-`, numbers and the float argument), each line valid for numpy.
The same source runs under @loom.jit (`relu` is loom.relu, `clamp` loom.clamp, ...) and
under numpy (`relu` is `np.maximum(v, 0)`, `clamp` `np.clip`). The arrays hold small
integers, and the generator keeps a bound on every value's magnitude under 2**20, so that
every sum and product is exact in float32 and float64 and the two must agree bit for bit.

`int8_programs` are quantized layers: `np.matmul(a0, a1, dtype=np.int32)` of int8 and
uint8 arrays (any mix, over their whole range), maybe an int32 bias added and relu, then
random steps as above: views of any value, contractions of the 8-bit ones into int32,
arithmetic with Python ints on the int32 ones (numpy's int32 arithmetic, kept under
2**31 so that numpy's scalars never overflow).

The arguments are passed with random layouts: row-major, Fortran order, a stepped view
of a larger array, a broadcast (stride 0), or reversed along a dimension (a negative
stride, which @loom.jit refuses: the refusal is checked, then a copy is passed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st
from kernels import prime_factors

import compiler as loom

DIMS = [1, 2, 3, 4, 5]
LAYOUTS = ["c", "c", "fortran", "stepped", "broadcast", "reversed"]
EXACT = 2**20  # every float value's magnitude stays below it: exact in float32 (24 bits) and float64
SMALL = 3  # the float arguments' values are integers in -SMALL..SMALL
INT32 = np.dtype(np.int32)
EIGHT_BITS = (np.dtype(np.int8), np.dtype(np.uint8))


@dataclass
class Value:
    name: str
    shape: tuple[int, ...]
    bound: float  # at most this in magnitude
    dtype: np.dtype


@dataclass
class Program:
    """A random program and the arguments to call it with."""

    source: str
    dtypes: list[np.dtype]  # the arrays'
    shapes: list[tuple[int, ...]]
    layouts: list[str]
    scalar: float | None  # the float argument s, when the program takes one
    seed: int
    pipeline: str

    def __repr__(self) -> str:
        return (f"Program(dtypes={[d.name for d in self.dtypes]}, shapes={self.shapes}, layouts={self.layouts}, "
                f"scalar={self.scalar}, seed={self.seed}, pipeline={self.pipeline!r}):\n{self.source}")

    def functions(self):
        """(the @loom.jit function, the same function under numpy)."""
        jitted = loom.jit(_define(self.source, JIT_NAMES), pipeline=self.pipeline)
        return jitted, _define(self.source, NUMPY_NAMES)

    def arguments(self) -> list[tuple[np.ndarray, np.ndarray | None]]:
        """Per array argument: (what to pass, the view in a refused layout, or None)."""
        rng = np.random.default_rng(self.seed)
        out = []
        for shape, dtype, layout in zip(self.shapes, self.dtypes, self.layouts):
            view = argument(shape, dtype, layout, rng)
            out.append((view, None) if all(s >= 0 for s in view.strides) else (np.ascontiguousarray(view), view))
        return out


JIT_NAMES = {"np": np, "relu": loom.relu, "clamp": loom.clamp, "broadcast_to": loom.broadcast_to,
             "contiguous": loom.contiguous}
NUMPY_NAMES = {"np": np, "relu": lambda v: np.maximum(v, 0), "clamp": np.clip, "broadcast_to": np.broadcast_to,
               "contiguous": lambda v: np.array(v, order="C")}  # a copy of any shape, 0-d included


def _define(source: str, names: dict):
    scope = dict(names)
    exec(compile(source, "<jit fuzz program>", "exec"), scope)
    return scope["program"]


def value_range(dtype: np.dtype) -> tuple[int, int]:
    """The arguments' values: an 8-bit type's whole range, int32 up to 2**16 (a bias),
    floats -SMALL..SMALL."""
    if dtype in EIGHT_BITS:
        return int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)
    return (-(2**16), 2**16) if dtype == INT32 else (-SMALL, SMALL)


def argument(shape: tuple[int, ...], dtype: np.dtype, layout: str, rng: np.random.Generator) -> np.ndarray:
    """Integers of `value_range` (a third of them its ends: an 8-bit type's extremes) in a
    layout: row-major, Fortran order, every other element of a larger array, a broadcast
    (stride 0 along a dimension longer than 1, where there is one), or reversed along a
    dimension (a negative stride)."""
    lo, hi = value_range(dtype)
    ends = rng.choice([lo, hi], size=shape)
    values = np.where(rng.random(shape) < 1 / 3, ends, rng.integers(lo, hi + 1, size=shape)).astype(dtype)
    if layout == "fortran":
        return np.asfortranarray(values)
    if layout == "stepped":
        view = np.zeros(tuple(2 * n + 1 for n in shape), dtype)[tuple(slice(1, None, 2) for _ in shape)]
        view[...] = values
        return view
    axes = [k for k, n in enumerate(shape) if n > 1]
    if layout == "broadcast" and axes:
        return np.broadcast_to(values.take([0], axes[rng.integers(len(axes))]), shape)
    if layout == "reversed" and axes:
        axis = axes[rng.integers(len(axes))]
        return np.flip(np.ascontiguousarray(np.flip(values, axis)), axis)
    return values


# --------------------------------------------------------------------------------------
# The generator
# --------------------------------------------------------------------------------------


class _Builder:
    def __init__(self, draw, dtypes, shapes):
        self.draw = draw
        self.arguments = [Value(f"a{i}", s, max(map(abs, value_range(d))), d)
                          for i, (s, d) in enumerate(zip(shapes, dtypes))]
        self.values = list(self.arguments)
        self.lines: list[str] = []
        self.uses_scalar = False

    def add(self, expression: str, shape: tuple[int, ...], bound: float, dtype: np.dtype) -> None:
        name = f"v{len(self.lines)}"
        self.lines.append(f"    {name} = {expression}")
        self.values.append(Value(name, tuple(shape), bound, dtype))

    def view(self, expression: str, shape: tuple[int, ...], v: Value) -> None:
        """A view of `v` (or a copy): its values, dtype and bound."""
        self.add(expression, shape, v.bound, v.dtype)

    def pick(self, values: list[Value] | None = None) -> Value:
        values = self.values if values is None else values
        return values[self.draw(st.integers(0, len(values) - 1))]


def _slice_text(start, stop, step) -> str:
    text = f"{'' if start is None else start}:{'' if stop is None else stop}"
    return text + (f":{step}" if step is not None else "")


def _index(b: _Builder, v: Value) -> None:
    """Basic indexing: per dimension a slice (any start, stop and step, out-of-range
    bounds included) or an integer; `None`s anywhere; an ellipsis for some dimensions."""
    draw = b.draw
    parts = []
    for n in v.shape:
        kind = draw(st.sampled_from(["integer", "whole", "reversed", "reversed", "slice", "slice", "slice"]))
        if kind == "integer" and n:
            parts.append(str(draw(st.integers(-n, n - 1))))
        elif kind in ("whole", "reversed"):  # the shape kept
            parts.append(":" if kind == "whole" else draw(st.sampled_from(["::-1", f"{n - 1}::-1", f"-1:{-n - 1}:-1"])))
        else:
            step = draw(st.sampled_from([None, 1, 2, 3, -1, -2, -3]))
            start = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            stop = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            parts.append(_slice_text(start, stop, step))
    if parts and draw(st.booleans()):  # an ellipsis in place of some dimensions' indices (or of none)
        at = draw(st.integers(0, len(parts)))
        parts[at:at + draw(st.integers(0, len(parts) - at))] = ["..."]
    for _ in range(draw(st.integers(0, 2))):
        parts.insert(draw(st.integers(0, len(parts))), "None")
    while parts and parts[-1] == ":" and draw(st.booleans()):  # trailing full slices may be left out
        parts.pop()
    index = ", ".join(parts) or "()"
    b.view(f"{v.name}[{index}]", eval(f"x[{index}]", {"x": np.empty(v.shape)}).shape, v)


def _transpose(b: _Builder, v: Value) -> None:
    perm = tuple(b.draw(st.permutations(range(len(v.shape)))))
    shape = tuple(v.shape[p] for p in perm)
    spelling = b.draw(st.sampled_from(["method", "tuple", "np", "T"]))
    if spelling == "T" or perm == tuple(reversed(range(len(v.shape)))) and spelling != "np":
        b.view(f"{v.name}.T", tuple(reversed(v.shape)), v)
    elif spelling == "np":
        b.view(f"np.transpose({v.name}, {perm})", shape, v)
    else:
        b.view(f"{v.name}.transpose({', '.join(map(str, perm)) if spelling == 'method' else perm})", shape, v)


def _reshape(b: _Builder, v: Value) -> None:
    """The element count regrouped into 1 to 4 dimensions, 1s sprinkled in, maybe one -1."""
    count = math.prod(v.shape)
    if count == 0:
        return
    rank = b.draw(st.integers(1, 4))
    dims = [1] * rank
    for f in b.draw(st.permutations(prime_factors(count))):
        dims[b.draw(st.integers(0, rank - 1))] *= f
    spelled = list(dims)
    if b.draw(st.booleans()):
        spelled[b.draw(st.integers(0, rank - 1))] = -1
    b.view(f"{v.name}.reshape({', '.join(map(str, spelled))})", tuple(dims), v)


def _broadcast(b: _Builder, v: Value) -> None:
    lead = b.draw(st.lists(st.sampled_from([1, 2, 3]), max_size=2 if len(v.shape) < 3 else 0))
    shape = (*lead, *(b.draw(st.sampled_from([1, 2, 3])) if n == 1 else n for n in v.shape))
    b.view(f"broadcast_to({v.name}, {shape})", shape, v)


def _contiguous(b: _Builder, v: Value) -> None:
    b.view(f"contiguous({v.name})", v.shape, v)


def _limit(dtype: np.dtype) -> int:
    """Every value of `dtype` stays below this in magnitude: floats exact, int32 not overflowing."""
    return EXACT if dtype.kind == "f" else 2**31


def _contracts(v: Value, w: Value) -> bool:
    """Whether Loom multiplies v by w: float32 or float64 alike, or int8 and uint8 (any mix)."""
    return v.dtype == w.dtype and v.dtype.kind == "f" or v.dtype in EIGHT_BITS and w.dtype in EIGHT_BITS


def _matmul(b: _Builder, v: Value) -> None:
    """v @ w with another value that fits (2-D @ 2-D, 3-D @ 3-D, 3-D @ 2-D), or else with
    v's own transpose; of 8-bit values, `np.matmul(v, w, dtype=np.int32)`."""
    if len(v.shape) not in (2, 3) or not _contracts(v, v):
        return

    def fits(w: Value) -> bool:
        if len(w.shape) != 2 and (len(w.shape) != 3 or len(v.shape) != 3 or w.shape[0] != v.shape[0]):
            return False
        return w.shape[-2] == v.shape[-1] and _contracts(v, w)

    others = [w for w in b.values if fits(w)]
    k = v.shape[-1]
    if others and b.draw(st.booleans()):
        w = b.pick(others)
        shape, right, bound = (*v.shape[:-1], w.shape[-1]), w.name, w.bound
    else:
        right = f"{v.name}.T" if len(v.shape) == 2 else f"{v.name}.transpose(0, 2, 1)"
        shape, bound = (*v.shape[:-1], v.shape[-2]), v.bound
    total = max(k, 1) * v.bound * bound
    if total >= _limit(INT32 if v.dtype in EIGHT_BITS else v.dtype):
        return
    if v.dtype in EIGHT_BITS:
        b.add(f"np.matmul({v.name}, {right}, dtype=np.int32)", shape, total, INT32)
    else:
        spelling = b.draw(st.sampled_from(["@", "@", "np"]))
        b.add(f"{v.name} @ {right}" if spelling == "@" else f"np.matmul({v.name}, {right})", shape, total, v.dtype)


def _elementwise(b: _Builder, v: Value) -> None:
    """v op w (either order) with a value of its dtype that broadcasts with it, a number
    (an int beside int32), or the float argument s (beside floats)."""
    if v.dtype in EIGHT_BITS:
        return
    draw = b.draw
    op = draw(st.sampled_from(["+", "-", "*"]))
    floats = v.dtype.kind == "f"
    kind = draw(st.sampled_from(["value", "value", "number", "s" if floats else "number"]))
    if kind == "value":
        others = [w for w in b.values if w.dtype == v.dtype and _broadcasts(v.shape, w.shape)]
        w = b.pick(others)
        other, shape, bound = w.name, np.broadcast_shapes(v.shape, w.shape), w.bound
    elif kind == "number":
        number = draw(st.sampled_from([0, 1, 2, -3, 0.5, -1.5] if floats else [0, 1, 2, -3]))
        other, shape, bound = repr(number), v.shape, abs(number)
    else:
        other, shape, bound = "s", v.shape, 3.0  # s is drawn from -2..2, called with s + 1 too
        b.uses_scalar = True
    total = v.bound * bound if op == "*" else v.bound + bound
    if total >= _limit(v.dtype):
        return
    left, right = (v.name, other) if draw(st.booleans()) else (other, v.name)
    if draw(st.integers(0, 3)) == 0:  # numpy's ufunc, which a traced array takes too
        ufunc = {"+": "add", "-": "subtract", "*": "multiply"}[op]
        b.add(f"np.{ufunc}({left}, {right})", shape, total, v.dtype)
    else:
        b.add(f"{left} {op} {right}", shape, total, v.dtype)


def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


def _unary(b: _Builder, v: Value) -> None:
    if v.dtype in EIGHT_BITS:
        return
    kind = b.draw(st.sampled_from(["relu", "neg", "clamp"] if v.dtype != INT32 else ["relu", "neg"]))
    if kind == "relu":
        b.add(f"relu({v.name})", v.shape, v.bound, v.dtype)
    elif kind == "clamp":  # bounds that are whole or half numbers: still exact
        low = b.draw(st.integers(-8, 4)) / 2
        b.add(f"clamp({v.name}, {low}, {low + b.draw(st.integers(0, 8)) / 2})", v.shape, v.bound, v.dtype)
    else:
        b.add(f"-{v.name}", v.shape, v.bound, v.dtype)


STEPS = {"index": _index, "transpose": _transpose, "reshape": _reshape, "broadcast": _broadcast,
         "contiguous": _contiguous, "matmul": _matmul, "elementwise": _elementwise, "unary": _unary}
#: how often each step is drawn: indexing, matmul and arithmetic most
WEIGHTS = {"index": 4, "matmul": 3, "elementwise": 3}


@st.composite
def programs(draw, pipelines=("naive",)) -> Program:
    """Float programs: one to three float32 or float64 arrays of any shapes."""
    dtype = np.dtype(draw(st.sampled_from([np.float64, np.float64, np.float32])))
    shapes = draw(st.lists(st.lists(st.sampled_from(DIMS), min_size=1, max_size=3).map(tuple), min_size=1,
                           max_size=3))
    return _program(draw, _Builder(draw, [dtype] * len(shapes), shapes), 2, pipelines)


@st.composite
def int8_programs(draw, pipelines=("naive",)) -> Program:
    """Quantized layers: `np.matmul(a0, a1, dtype=np.int32)` of int8 or uint8 arrays (2-D,
    3-D @ 3-D or 3-D @ 2-D), maybe + an int32 bias a2 and relu, then random steps."""
    m, k, n = (draw(st.sampled_from(DIMS)) for _ in range(3))
    batch = draw(st.sampled_from([(), (), (2,)]))
    shapes = [(*batch, m, k), (*draw(st.sampled_from([(), batch])), k, n)]
    dtypes = [np.dtype(draw(st.sampled_from([np.int8, np.uint8]))) for _ in shapes]
    if draw(st.booleans()):
        shapes.append(draw(st.sampled_from([(n,), (1, n), (m, n)])))
        dtypes.append(INT32)
    b = _Builder(draw, dtypes, shapes)
    a0, a1 = b.values[:2]
    b.add("np.matmul(a0, a1, dtype=np.int32)", (*batch, m, n), k * a0.bound * a1.bound, INT32)
    if len(shapes) == 3:
        bound = b.values[-1].bound + b.arguments[2].bound
        b.add("v0 + a2" if draw(st.booleans()) else "a2 + v0", (*batch, m, n), bound, INT32)
    if draw(st.booleans()):
        b.add(f"relu({b.values[-1].name})", (*batch, m, n), b.values[-1].bound, INT32)
    return _program(draw, b, 0, pipelines)


def _program(draw, b: _Builder, least: int, pipelines) -> Program:
    """The program of `b`'s arguments and lines, with `least` to 8 random steps more."""
    shapes, dtypes = [a.shape for a in b.arguments], [a.dtype for a in b.arguments]
    kinds = [kind for kind in sorted(STEPS) for _ in range(WEIGHTS.get(kind, 1))]
    for kind in draw(st.lists(st.sampled_from(kinds), min_size=least, max_size=8)):
        recent = draw(st.sampled_from([1, 1, 3, len(b.values)]))  # mostly a chain: the value made last
        STEPS[kind](b, b.pick(b.values[-recent:]))
    computed = b.values[len(shapes):] or b.values
    results = [computed[-1].name]
    if draw(st.booleans()):
        results.append(b.pick().name)
    params = [f"a{i}" for i in range(len(shapes))] + (["s"] if b.uses_scalar else [])
    source = "\n".join([f"def program({', '.join(params)}):", *b.lines,
                        f"    return {', '.join(results)}{',' if draw(st.booleans()) else ''}"])  # one: maybe a tuple
    scalar = float(draw(st.sampled_from([-2, -1, -0.5, 0, 0.5, 1, 2]))) if b.uses_scalar else None
    return Program(source, dtypes, shapes, [draw(st.sampled_from(LAYOUTS)) for _ in shapes], scalar,
                   draw(st.integers(0, 2**16)), draw(st.sampled_from(pipelines)))
